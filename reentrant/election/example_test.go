package election_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// connect returns a relock client on an embedded Redis; a program
// connects to its own Redis.
func connect() (*reentrant.Client, func()) {
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
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return locks, func() { locks.Close(); rdb.Close(); m.Close() }
}

func Example() {
	locks, stop := connect()
	defer stop()
	ctx := context.Background()

	e := election.New(locks, "scheduler", election.Options{})
	leading, term, err := e.Campaign(ctx, "host-1")
	if err != nil {
		log.Fatal(err)
	}
	l, _ := e.Leader(ctx)
	fmt.Println(l.Value, "leads; its term is the one Campaign gave:", l.Term == term)

	_ = e.Proclaim(leading, "host-1 (draining)")
	l, _ = e.Leader(ctx)
	fmt.Println(l.Value, "leads, in the same term:", l.Term == term)

	_ = e.Resign(leading)
	_, err = e.Leader(ctx)
	fmt.Println("after Resign:", errors.Is(err, election.ErrNoLeader))
	// Output:
	// host-1 leads; its term is the one Campaign gave: true
	// host-1 (draining) leads, in the same term: true
	// after Resign: true
}

func ExampleFenced() {
	locks, stop := connect()
	defer stop()
	ctx := context.Background()

	store := election.NewFenced(locks)
	_ = store.Set(ctx, "config", 7, "written in term 7")
	err := store.Set(ctx, "config", 6, "written late in term 6")
	fmt.Println(errors.Is(err, election.ErrStaleTerm))
	v, _, _ := store.Get(ctx, "config", 7)
	fmt.Println(v)
	// Output:
	// true
	// written in term 7
}

// A deploy asks the leader to hand over to a named candidate: the leader's
// Run sees its leading context end with ErrResignRequested, resigns to
// that candidate, and stands again.
func ExampleElection_RequestResign() {
	locks, stop := connect()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := election.New(locks, "scheduler", election.Options{})

	asked := make(chan error, 1)
	go e.Run(ctx, "host-1", func(leading context.Context, term election.Term) error {
		<-leading.Done()
		if errors.Is(context.Cause(leading), election.ErrResignRequested) {
			asked <- context.Cause(leading)
		}
		return nil
	})
	for o := range e.Observe(ctx) {
		if o.Value == "host-1" {
			break
		}
	}
	led := make(chan string, 1)
	go func() {
		leading, _, err := e.Campaign(ctx, "host-2")
		if err == nil {
			led <- "host-2"
			_ = e.Resign(leading)
		}
	}()
	var cs []election.Candidate
	for o := range e.ObserveCandidates(ctx) {
		if cs = o.Candidates; len(cs) == 2 {
			break
		}
	}
	for _, c := range cs {
		fmt.Println(c.Value, "stands; leads:", c.Leads)
	}

	if _, err := e.RequestResign(ctx, election.To(cs[1].Owner)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("host-1 was asked:", errors.Is(<-asked, election.ErrResignRequested))
	fmt.Println(<-led, "leads")
	// Output:
	// host-1 stands; leads: true
	// host-2 stands; leads: false
	// host-1 was asked: true
	// host-2 leads
}
