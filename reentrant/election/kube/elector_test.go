package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// The elector's timings in these tests: short, so that a test takes
// seconds, and far enough apart that a busy machine keeps them.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 200 * time.Millisecond
)

// candidate is one client-go LeaderElector on a ResourceLock, recording
// its callbacks.
type candidate struct {
	id     string
	lock   *kube.ResourceLock
	le     *leaderelection.LeaderElector
	cancel context.CancelFunc
	done   chan struct{}

	started chan election.Term // the term, as OnStartedLeading saw it
	stopped chan struct{}
	mu      sync.Mutex
	leaders []string // OnNewLeader's, in order
}

// board counts the candidates leading at once, by their callbacks.
type board struct {
	mu      sync.Mutex
	leading int
	most    int
}

func (b *board) change(d int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leading += d
	b.most = max(b.most, b.leading)
}

func startCandidate(t *testing.T, s *redistest.Server, name, id string, b *board) *candidate {
	t.Helper()
	cd := &candidate{id: id, lock: newLock(t, s, name, id), done: make(chan struct{}),
		started: make(chan election.Term, 1), stopped: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            cd.lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				b.change(1)
				cd.started <- cd.lock.Term()
			},
			OnStoppedLeading: func() {
				select {
				case <-cd.started: // it led
					b.change(-1)
				default:
				}
				close(cd.stopped)
			},
			OnNewLeader: func(identity string) {
				cd.mu.Lock()
				defer cd.mu.Unlock()
				cd.leaders = append(cd.leaders, identity)
			},
		},
	})
	require.NoError(t, err)
	cd.le = le
	ctx, cancel := context.WithCancel(context.Background())
	cd.cancel = cancel
	go func() {
		defer close(cd.done)
		le.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-cd.done })
	return cd
}

// lastLeader returns the last leader OnNewLeader told cd of.
func (cd *candidate) lastLeader() string {
	cd.mu.Lock()
	defer cd.mu.Unlock()
	if len(cd.leaders) == 0 {
		return ""
	}
	return cd.leaders[len(cd.leaders)-1]
}

// firstStarted waits for one of cds to start leading, and returns it with
// its term.
func firstStarted(t *testing.T, within time.Duration, cds ...*candidate) (*candidate, election.Term) {
	t.Helper()
	deadline := time.After(within)
	for {
		for _, cd := range cds {
			select {
			case term := <-cd.started:
				cd.started <- term // keep it: OnStoppedLeading reads it
				return cd, term
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no candidate started leading within %v", within)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestClientGoElectorOnRedis: client-go's LeaderElector, unchanged, on
// ResourceLocks of one Redis: one of three leads, all are told who; the
// leader's cancel (ReleaseOnCancel) hands over at the next retry, long
// before its lease would have run out, with a larger term; callbacks fire
// as on a Lease.
func TestClientGoElectorOnRedis(t *testing.T) {
	s := redistest.Start(t)
	var b board
	cds := []*candidate{
		startCandidate(t, s, "ctrl", "a", &b),
		startCandidate(t, s, "ctrl", "b", &b),
		startCandidate(t, s, "ctrl", "c", &b),
	}
	leader, term := firstStarted(t, leaseDuration+2*time.Second, cds...)
	assert.True(t, leader.le.IsLeader())
	assert.Positive(t, int64(term))
	for _, cd := range cds {
		require.Eventually(t, func() bool { return cd.lastLeader() == leader.id }, 2*time.Second, 5*time.Millisecond,
			"%s is told the leader", cd.id)
	}
	got, _, err := newLock(t, s, "ctrl", "reader").Get(context.Background())
	require.NoError(t, err)
	assert.Equal(t, leader.id, got.HolderIdentity)
	assert.Equal(t, int(term), got.LeaderTransitions, "the record's LeaderTransitions is the term")

	// Several renewals later the same leader leads with the same term.
	time.Sleep(5 * retryPeriod)
	assert.True(t, leader.le.IsLeader())
	assert.Equal(t, term, leader.lock.Term(), "renewals keep the term")

	start := time.Now()
	leader.cancel()
	<-leader.stopped
	var rest []*candidate
	for _, cd := range cds {
		if cd != leader {
			rest = append(rest, cd)
		}
	}
	next, nextTerm := firstStarted(t, leaseDuration, rest...)
	took := time.Since(start)
	// A release is seen at the next retry (RetryPeriod, jittered up to
	// 1.2x); without it, the others would wait out the lease.
	assert.Less(t, took, leaseDuration/2, "handed over at the next retry, not at the lease's end")
	assert.Greater(t, nextTerm, term, "the next leader's term")
	t.Logf("handed over to %s in %v, term %d to %d", next.id, took, term, nextTerm)

	b.mu.Lock()
	most := b.most
	b.mu.Unlock()
	assert.Equal(t, 1, most, "one leader at a time")
}

// TestClientGoElectorKilledLeader: electors in three processes; the
// leader's process is killed (SIGKILL: no release); the next leads once the
// lease it last saw renewed has run out, within LeaseDuration +
// RetryPeriod of the kill, and not before LeaseDuration less the renewals'
// period (the raw record carries its version, so that the elector sees
// every renewal, not one a second); with a larger term.
func TestClientGoElectorKilledLeader(t *testing.T) {
	s := redistest.Start(t)
	procs := make([]*process, 3)
	for i := range procs {
		procs[i] = startProcess(t, s, "killed", fmt.Sprintf("p%d", i))
	}
	leader, term := firstLeading(t, leaseDuration+5*time.Second, procs...)
	time.Sleep(2 * retryPeriod) // it renews
	start := time.Now()
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGKILL))
	var rest []*process
	for _, p := range procs {
		if p != leader {
			rest = append(rest, p)
		}
	}
	next, nextTerm := firstLeading(t, leaseDuration+5*time.Second, rest...)
	took := time.Since(start)
	t.Logf("%s led after %s was killed: %v, term %d to %d", next.id, leader.id, took, term, nextTerm)
	assert.Greater(t, nextTerm, term)
	assert.GreaterOrEqual(t, took, leaseDuration-2*retryPeriod, "not before the lease ran out")
	// LeaseDuration + RetryPeriod (jittered up to 1.2x), and slack for a
	// busy machine; a successor that never came would time out above.
	assert.Less(t, took, leaseDuration+retryPeriod*6/5+time.Second)
}

// process is a candidate in a process of its own (the test binary, run
// as one: see TestMain).
type process struct {
	id      string
	cmd     *exec.Cmd
	leading chan election.Term
}

func startProcess(t *testing.T, s *redistest.Server, name, id string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), candidateEnv+"="+strings.Join([]string{s.Addr, name, id}, ","))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &process{id: id, cmd: cmd, leading: make(chan election.Term, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if term, ok := strings.CutPrefix(sc.Text(), "LEADING "); ok {
				n, _ := strconv.ParseInt(term, 10, 64)
				p.leading <- election.Term(n)
			}
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return p
}

func firstLeading(t *testing.T, within time.Duration, ps ...*process) (*process, election.Term) {
	t.Helper()
	deadline := time.After(within)
	for {
		for _, p := range ps {
			select {
			case term := <-p.leading:
				return p, term
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatalf("no process led within %v", within)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// candidateEnv, set to "addr,name,identity", makes the test binary a
// candidate: it prints "LEADING <term>" when it starts leading, and runs
// until killed.
const candidateEnv = "RELOCK_KUBE_CANDIDATE"

func runCandidate(spec string) {
	parts := strings.Split(spec, ",")
	addr, name, id := parts[0], parts[1], parts[2]
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lock := kube.NewResourceLock(c, name, resourcelock.ResourceLockConfig{Identity: id})
	leaderelection.RunOrDie(context.Background(), leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		Name:          name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				fmt.Printf("LEADING %d\n", lock.Term())
			},
			OnStoppedLeading: func() { os.Exit(1) },
		},
	})
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(candidateEnv); spec != "" {
		runCandidate(spec)
		return
	}
	if spec := os.Getenv(figureEnv); spec != "" {
		runFigureCandidate(spec)
		return
	}
	// client-go's elector logs every failed try: the fault tests make
	// many, on purpose.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m)
}
