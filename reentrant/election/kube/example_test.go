package kube_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// locks returns a relock Client on an embedded miniredis; a program
// connects to its own Redis.
func locks() (*reentrant.Client, func()) {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { c.Close(); rdb.Close(); m.Close() }
}

// client-go's elector, unchanged, on a record in Redis.
func ExampleNewResourceLock() {
	c, done := locks()
	defer done()

	lock := kube.NewResourceLock(c, "my-controller", resourcelock.ResourceLockConfig{Identity: "pod-a"})
	ctx, cancel := context.WithCancel(context.Background())
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				// lock.Term() fences this leadership's writes.
				fmt.Println("leading, with a term:", lock.Term() > 0)
				cancel() // done: hand over at once
			},
			OnStoppedLeading: func() { fmt.Println("stopped leading") },
		},
	})
	// Output:
	// leading, with a term: true
	// stopped leading
}

// A controller-runtime manager elected through client-go's elector on
// Redis: the manager's own leader election, with the resource lock
// replaced.
func ExampleNewResourceLock_controllerRuntime() {
	c, done := locks()
	defer done()
	pod, _ := os.Hostname()

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		LeaderElection:                      true,
		LeaderElectionID:                    "my-controller",
		LeaderElectionResourceLockInterface: kube.NewResourceLock(c, "my-controller", resourcelock.ResourceLockConfig{Identity: pod}),
		LeaderElectionReleaseOnCancel:       true,
	})
	if err != nil {
		log.Fatal(err)
	}
	// ... set up controllers with mgr ...
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Fatal(err) // "leader election lost": exit, and be restarted
	}
}

// A controller-runtime manager run only while leading on relock's own
// election: a resigned leader is succeeded in milliseconds, a crashed one
// within the watchdog's timeout.
func ExampleRun_controllerRuntime() {
	c, done := locks()
	defer done()
	pod, _ := os.Hostname()

	e := election.New(c, "my-controller", election.Options{})
	err := kube.Run(ctrl.SetupSignalHandler(), e, pod, func(leading context.Context, term election.Term) error {
		mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
			LeaderElection: false, // relock elects
			// The controllers' contexts are made from leading: a
			// reconciler reads the term with reentrant.TokenFrom(ctx), to
			// fence its writes.
			BaseContext: func() context.Context { return leading },
		})
		if err != nil {
			return err
		}
		// ... set up controllers with mgr ...
		return mgr.Start(leading)
	}, kube.RunOptions{})
	if err != nil {
		log.Fatal(err) // kube.ErrLeadershipLost: exit, and be restarted
	}
}

func ExampleRun() {
	c, done := locks()
	defer done()

	e := election.New(c, "my-controller", election.Options{})
	err := kube.Run(context.Background(), e, "pod-a", func(leading context.Context, term election.Term) error {
		fenced, _ := reentrant.TokenFrom(leading)
		fmt.Println("leading, fenced by the term:", fenced == int64(term))
		return nil // done: resign
	}, kube.RunOptions{})
	fmt.Println(err)
	// Output:
	// leading, fenced by the term: true
	// <nil>
}
