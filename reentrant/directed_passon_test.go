package reentrant

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/scripts"
)

// A waiter woken by a release that gives up before it tries (its ctx ends
// right then) passes the wake-up on: the other waiter of its client takes
// the lock at once, not at its next re-poll or when the released hold's
// TTL would have run out (a minute each here).
func TestWokenWaiterGivesUpPassesOn(t *testing.T) {
	s := redistest.Start(t)
	holder, err := New(s.Client(), Options{})
	require.NoError(t, err)
	defer holder.Close()
	waiters, err := New(s.Client(), Options{RepollInterval: time.Minute})
	require.NoError(t, err)
	defer waiters.Close()

	held, err := holder.Lock("pass").Lock(context.Background(), LeaseFor(time.Minute))
	require.NoError(t, err)
	require.NoError(t, s.Do("CONFIG", "RESETSTAT").Error())

	// Whichever waiter a release wakes first gives up: its ctx is
	// cancelled before its next attempt.
	type cancelKey struct{}
	gaveUp := make(chan struct{})
	waiters.opts.Hooks.Woken = func(ctx context.Context, _ Kind, _ string) {
		select {
		case <-gaveUp:
		default:
			close(gaveUp)
			ctx.Value(cancelKey{}).(context.CancelFunc)()
		}
	}
	results := make(chan error, 2)
	acquired := make(chan time.Time, 2)
	// The first waiter tries, subscribes to its client's wake channel and
	// tries again; the second, started once the first sleeps, finds the
	// channel live, joins it and tries once. Then both sleep on it, so the
	// release's message wakes one of them (a message that came between a
	// waiter's attempts would be taken by its next, waking no one).
	for asleep := range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ctx = context.WithValue(ctx, cancelKey{}, cancel)
			got, err := waiters.Lock("pass").Lock(ctx)
			if err == nil {
				acquired <- time.Now()
				err = waiters.Lock("pass").Unlock(got)
			}
			results <- err
		}()
		redistest.Goroutines(t, "the waiters asleep", asleep+1, sleeping)
	}
	released := time.Now()
	require.NoError(t, holder.Lock("pass").Unlock(held))
	select { // within a tenth of the one-minute fallback
	case at := <-acquired:
		t.Logf("the other waiter took the lock %v after the release", at.Sub(released))
	case <-time.After(6 * time.Second):
		t.Fatal("the wake-up was not passed on")
	}
	errs := []error{recv(t, results), recv(t, results)}
	assert.ElementsMatch(t, []bool{true, false}, []bool{errs[0] == nil, errs[1] == nil}, "one gave up, one held and released: %v", errs)
}

// sleeping says whether a goroutine's stack is a wait's, asleep between
// attempts.
func sleeping(g [][]byte) bool {
	for _, line := range g {
		if bytes.Contains(line, []byte("reentrant.(*waiting).sleep(")) {
			return true
		}
	}
	return false
}

// A waiter alone on its client's wake channel decides, when it makes its
// attempt, that winning takes the client out of the lock's waiters' set.
// Another waiter of the client joins the channel just then and makes its
// attempt, which registers nothing since the client is still in the set,
// before the first one's attempt runs and wins. The late one must not sleep
// unregistered until its timer (the holder's 30 s TTL, a minute's re-poll):
// the winner passes it a wake, it tries again and registers, and the
// winner's release tells it.
func TestWinnerAloneNudgesLateJoiner(t *testing.T) {
	s := redistest.Start(t)
	holder, err := New(s.Client(), Options{})
	require.NoError(t, err)
	defer holder.Close()
	c, err := New(s.Client(), Options{RepollInterval: time.Minute})
	require.NoError(t, err)
	defer c.Close()
	// Once armed, the next attempt (the first waiter's) waits before it is
	// sent; the second waiter's attempts go on.
	deciding, proceed := make(chan struct{}), make(chan struct{})
	var armed, hooked atomic.Bool
	c.hookBeforeSend = func() {
		if armed.Load() && !hooked.Swap(true) {
			close(deciding)
			<-proceed
		}
	}
	const name = "joined-late"
	waiters := "relock_waiters:{" + name + "}"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	require.NoError(t, s.Do("CONFIG", "RESETSTAT").Error()) // New's rights probes
	_, err = holder.Lock(name).Lock(ctx)
	require.NoError(t, err)
	first := make(chan error, 1)
	go func() {
		held, err := c.Lock(name).Lock(ctx)
		if err == nil {
			err = c.Lock(name).Unlock(held)
		}
		first <- err
	}()
	redistest.Eventually(t, 10*time.Second, "the first waiter registered and asleep", func() bool {
		n, _ := s.Do("ZCARD", waiters).AsInt64()
		return n == 1 && s.ScriptCalls() >= 3 // the holder's acquire, the waiter's two attempts
	})

	// Woken (a wake with no release), the first waiter decides on its
	// attempt; before it is sent the second joins and tries, and the lock
	// is freed without a release (its key deleted).
	armed.Store(true)
	require.NoError(t, s.Do("PUBLISH", scripts.WakeChannel(name, c.ID()), "0").Error())
	select {
	case <-deciding:
	case <-time.After(10 * time.Second):
		t.Fatal("the first waiter was not woken")
	}
	calls := s.ScriptCalls()
	second := make(chan error, 1)
	go func() {
		held, err := c.Lock(name).Lock(ctx)
		if err == nil {
			err = c.Lock(name).Unlock(held)
		}
		second <- err
	}()
	redistest.Eventually(t, 10*time.Second, "the second waiter's attempt", func() bool { return s.ScriptCalls() > calls })
	require.NoError(t, s.Do("DEL", name).Error())
	close(proceed)
	select {
	case err := <-first:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the first waiter did not take the freed lock")
	}
	select {
	case err := <-second:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the second waiter was not told: it sleeps unregistered")
	}
}
