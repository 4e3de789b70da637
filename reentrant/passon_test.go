package reentrant

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
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
	waiters.opts.Hooks.Woken = func(ctx context.Context, _, _ string) {
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
	// tries again; the second, started once that has run, finds the
	// channel live, joins it and tries once. Then both wait on it: a wake
	// that came now would be queued for them.
	for _, calls := range []int64{2, 3} {
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
		deadline := time.Now().Add(20 * time.Second)
		for s.ScriptCalls() < calls {
			require.True(t, time.Now().Before(deadline), "waiters did not queue")
			time.Sleep(time.Millisecond)
		}
	}
	released := time.Now()
	require.NoError(t, holder.Lock("pass").Unlock(held))
	select { // within a tenth of the one-minute fallback
	case at := <-acquired:
		t.Logf("the other waiter took the lock %v after the release", at.Sub(released))
	case <-time.After(6 * time.Second):
		t.Fatal("the wake-up was not passed on")
	}
	errs := []error{<-results, <-results}
	assert.ElementsMatch(t, []bool{true, false}, []bool{errs[0] == nil, errs[1] == nil}, "one gave up, one held and released: %v", errs)
}
