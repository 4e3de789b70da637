package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// The takeover figures of docs/kubernetes.md: client-go's elector on a
// ResourceLock beside Run, each candidate a process of its own, with
// leases of one length (client-go's LeaseDuration, relock's watchdog
// timeout): controller-runtime's defaults (15 s, 10 s, 2 s) divided by 3.
//
//	cd reentrant/election/kube && go test -run '^$' -bench Takeover -benchtime 20x
const (
	figureLease = 5 * time.Second
	figureRenew = 10 * time.Second / 3
	figureRetry = 2 * time.Second / 3
)

// BenchmarkTakeover measures, per round, from the moment the leader's
// process is told to resign (SIGTERM: its ctx ends, and it gives the lease
// back), is killed (SIGKILL) or is paused (SIGSTOP) to the moment the
// other candidate leads; and, after a pause, from the leader's SIGCONT to
// the moment it knows it no longer leads (a controller acting meanwhile
// acts as a leader that is not one).
func BenchmarkTakeover(b *testing.B) {
	for _, how := range []string{"clientgo", "relock"} {
		for _, act := range []string{"resign", "crash", "pause"} {
			b.Run(how+"/"+act, func(b *testing.B) { benchmarkTakeover(b, how, act) })
		}
	}
}

func benchmarkTakeover(b *testing.B, how, act string) {
	s := redistest.Start(b)
	name := "takeover-" + how + "-" + act
	leader := startFigureCandidate(b, s, how, name, "c0")
	if _, ok := leader.waitLeading(30 * time.Second); !ok {
		b.Fatal("nobody led")
	}
	var took, stale []time.Duration
	for i := 1; b.Loop(); i++ {
		next := startFigureCandidate(b, s, how, name, fmt.Sprintf("c%d", i))
		time.Sleep(figureRetry + 200*time.Millisecond) // it waits, and the leader renews
		start := time.Now()
		switch act {
		case "resign":
			leader.signal(b, syscall.SIGTERM)
		case "crash":
			leader.signal(b, syscall.SIGKILL)
		case "pause":
			leader.signal(b, syscall.SIGSTOP)
		}
		led, ok := next.waitLeading(4 * figureLease)
		if !ok {
			b.Fatalf("round %d: nobody led after the %s", i, act)
		}
		took = append(took, led.Sub(start))
		if act == "pause" {
			resumed := time.Now()
			leader.signal(b, syscall.SIGCONT)
			lost, ok := leader.waitLost(4 * figureLease)
			if !ok {
				b.Fatalf("round %d: the paused leader never learned it lost", i)
			}
			stale = append(stale, max(lost.Sub(resumed), 0))
		}
		leader.stop()
		leader = next
	}
	leader.stop()
	report(b, took, "takeover")
	if len(stale) > 0 {
		report(b, stale, "stale-after-resume")
	}
}

// report adds the median and the largest of ds, in ms, to b's figures.
func report(b *testing.B, ds []time.Duration, what string) {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), what+"-p50-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), what+"-max-ms")
	b.ReportMetric(0, "ns/op")
}

// figureCandidate is a candidate process of the figures.
type figureCandidate struct {
	cmd     *exec.Cmd
	leading chan time.Time
	lost    chan time.Time
	exited  chan struct{}
}

func startFigureCandidate(b *testing.B, s *redistest.Server, how, name, id string) *figureCandidate {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), figureEnv+"="+strings.Join([]string{how, s.Addr, name, id}, ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	fc := &figureCandidate{cmd: cmd, leading: make(chan time.Time, 1), lost: make(chan time.Time, 1), exited: make(chan struct{})}
	go func() {
		defer close(fc.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			what, at, _ := strings.Cut(sc.Text(), " ")
			ns, _ := strconv.ParseInt(at, 10, 64)
			switch what {
			case "LEADING":
				fc.leading <- time.Unix(0, ns)
			case "LOST":
				fc.lost <- time.Unix(0, ns)
			}
		}
	}()
	b.Cleanup(fc.stop)
	return fc
}

func (fc *figureCandidate) waitLeading(within time.Duration) (time.Time, bool) {
	select {
	case t := <-fc.leading:
		return t, true
	case <-time.After(within):
		return time.Time{}, false
	}
}

func (fc *figureCandidate) waitLost(within time.Duration) (time.Time, bool) {
	select {
	case t := <-fc.lost:
		return t, true
	case <-time.After(within):
		return time.Time{}, false
	}
}

func (fc *figureCandidate) signal(b *testing.B, sig syscall.Signal) {
	if err := fc.cmd.Process.Signal(sig); err != nil {
		b.Fatal(err)
	}
}

func (fc *figureCandidate) stop() {
	_ = fc.cmd.Process.Signal(syscall.SIGCONT)
	_ = fc.cmd.Process.Kill()
	_ = fc.cmd.Wait()
}

// figureEnv, set to "how,addr,name,identity", makes the test binary a
// candidate of the figures: how is "clientgo" (client-go's elector on a
// ResourceLock) or "relock" (Run). It prints "LEADING <unix ns>" when it
// starts leading and "LOST <unix ns>" when it learns it no longer leads;
// SIGTERM ends its ctx, which gives the lease back.
const figureEnv = "RELOCK_KUBE_FIGURE"

func runFigureCandidate(spec string) {
	parts := strings.Split(spec, ",")
	how, addr, name, id := parts[0], parts[1], parts[2], parts[3]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	say := func(what string) { fmt.Printf("%s %d\n", what, time.Now().UnixNano()) }
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: figureLease})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	switch how {
	case "clientgo":
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            kube.NewResourceLock(c, name, resourcelock.ResourceLockConfig{Identity: id}),
			LeaseDuration:   figureLease,
			RenewDeadline:   figureRenew,
			RetryPeriod:     figureRetry,
			ReleaseOnCancel: true,
			Name:            name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { say("LEADING") },
				OnStoppedLeading: func() { say("LOST") },
			},
		})
	case "relock":
		_ = kube.Run(ctx, election.New(c, name, election.Options{}), id, func(leading context.Context, _ election.Term) error {
			say("LEADING")
			<-leading.Done()
			say("LOST")
			return nil
		}, kube.RunOptions{})
	}
	c.Close()
	rdb.Close()
	os.Exit(0)
}
