// Package reentranttest runs relock on an embedded miniredis, for the unit
// tests of code that takes locks, permits, latches or rate limits: one
// line, no server, nothing left running after the test. Two Clients, as
// two processes would have, share one embedded Redis:
//
//	first, m := reentranttest.New(t, reentrant.Options{})
//	second, err := reentrant.New(reentranttest.Rueidis(t, m), reentrant.Options{})
//
// TestNightlyReportRunsAlone, in this package's example_test.go, is a test to
// copy; LockOrder is a hook that fails a test taking locks in an order
// that could deadlock.
//
// miniredis runs relock's scripts, pub/sub and TTLs. It has no WAIT (leave
// Options.ReplicaSync off), no sharded pub/sub (New picks classic, as
// against any server without a cluster), no cluster or Sentinel, and of
// the faults only a lock that vanishes (Vanish) and a server that lost
// its data (Empty): StartServer runs a redis-server of the test's own for
// a server that stops answering or holds writes up. Test failover and the
// Java side against redis-server too. See docs/testing.md.
package reentranttest

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// New starts a miniredis whose TTLs follow the clock, as a real server's
// do, and returns a relock Client on it made with opts, and the server.
// All of it is closed when the test ends, the Client first. The server
// listens on no port: Rueidis connects more clients to it, in memory.
//
// m.FastForward(d) moves the server's TTLs d ahead, so keys expire early;
// the Client's own deadlines (a LeaseFor hold's end, the watchdog's) follow
// the clock, or a testing/synctest bubble's fake clock when New is called
// inside one.
func New(t testing.TB, opts reentrant.Options) (*reentrant.Client, *miniredis.Miniredis) {
	t.Helper()
	// No TCP listener: connections are in memory (Rueidis dials m.Dial), so
	// nothing blocks on the network and a synctest bubble's clock can move.
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	t.Cleanup(m.Close)
	locks, err := reentrant.New(Rueidis(t, m), opts)
	if err != nil {
		t.Fatalf("reentranttest: %v", err)
	}
	t.Cleanup(func() { locks.Close() }) // runs before the rueidis client's
	return locks, m
}

// Rueidis returns a rueidis client for m, closed when the test ends, with
// the settings miniredis needs: no client-side cache, RESP2 (miniredis
// refuses ordinary commands on a subscribed RESP3 connection), one node
// (rueidis would take miniredis for a one-node cluster), and in-memory
// connections (m.Dial, which also works inside a testing/synctest bubble),
// always pipelined, since an in-memory connection has no buffer. Use it
// for a second Client on the same server, as another process would have.
func Rueidis(t testing.TB, m *miniredis.Miniredis) rueidis.Client {
	t.Helper()
	return redistest.MiniredisClient(t, m, rueidis.ClientOption{InitAddress: []string{"miniredis"}}) // dialled in memory
}

// LockOrder returns hooks that fail t when two owners take the same two
// locks in opposite orders (one takes B while holding A, another takes A
// while holding B), as go-deadlock does in one process: a run that was
// lucky, and did not deadlock, fails all the same. Give them to the
// Clients under test (Options.Hooks); every Client of a test may share
// them. It looks at locks only, not at semaphores, latches or rate
// limiters, and it replaces any other hooks. A report names both
// acquisitions by the line that made them (the hooks run inside the
// library, so the test's own report line says nothing) and their owners.
func LockOrder(t testing.TB) reentrant.Hooks {
	o := &lockOrder{t: t, held: map[string]map[string]int{}, after: map[[2]string]taking{}}
	return reentrant.Hooks{AcquireEnded: o.acquired, HoldEnded: o.ended}
}

// lockOrder is the state of LockOrder's hooks.
type lockOrder struct {
	t    testing.TB
	mu   sync.Mutex
	held map[string]map[string]int // owner -> the locks it holds, with their counts
	// after[{a, b}] is the first taking of b seen while a was held.
	after map[[2]string]taking
}

// taking is one acquisition: its owner, and the line of the caller's code
// that asked for it.
type taking struct {
	owner, at string
}

func (k taking) String() string { return "owner " + k.owner + " at " + k.at }

// caller returns file:line of the innermost frame outside relock's
// reentrant package and this hook: the code that called Lock (or Do).
func caller() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "github.com/relock-go/relock/reentrant.") &&
			!strings.HasPrefix(f.Function, "github.com/relock-go/relock/reentrant/reentranttest.") &&
			!strings.HasPrefix(f.Function, "runtime.") {
			return filepath.Base(f.File) + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return "an unknown line"
		}
	}
}

func (o *lockOrder) acquired(ctx context.Context, a reentrant.Acquire) {
	owner, ok := reentrant.OwnerFrom(ctx)
	if a.Err != nil || !a.Held || !ok || !isLock(a.Kind) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	held := o.held[owner.String()]
	var this taking
	for first := range held {
		if first == a.Name {
			continue
		}
		if this.at == "" {
			this = taking{owner: owner.String(), at: caller()}
		}
		pair := [2]string{first, a.Name}
		if _, seen := o.after[pair]; !seen {
			o.after[pair] = this
		}
		if other, seen := o.after[[2]string{a.Name, first}]; seen {
			o.t.Errorf("reentranttest: locks taken in opposite orders, which can deadlock: %q while holding %q by %v; %q while holding %q by %v",
				first, a.Name, other, a.Name, first, this)
		}
	}
	if held == nil {
		held = map[string]int{}
		o.held[owner.String()] = held
	}
	held[a.Name]++
}

func (o *lockOrder) ended(_ context.Context, e reentrant.HoldEnd) {
	if !isLock(e.Kind) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	held := o.held[e.Owner.String()]
	if held[e.Name]--; held[e.Name] <= 0 {
		delete(held, e.Name)
	}
	if len(held) == 0 {
		delete(o.held, e.Owner.String())
	}
}

// isLock reports whether kind is held by an owner.
func isLock(kind reentrant.Kind) bool {
	switch kind {
	case reentrant.KindSemaphore, reentrant.KindPermitSemaphore, reentrant.KindLatch, reentrant.KindRate:
		return false
	}
	return true
}
