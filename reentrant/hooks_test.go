package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// recorder keeps what the hooks were told, as lines.
type recorder struct {
	mu     sync.Mutex
	events []string
	renew  []reentrant.Renewal
	holds  int // held acquisitions not yet ended
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) hooks() reentrant.Hooks {
	return reentrant.Hooks{
		AcquireStarted: func(_ context.Context, a reentrant.Acquire) {
			r.add("start %s %s", a.Kind, a.Name)
		},
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) {
			outcome := "ok"
			switch {
			case errors.Is(a.Err, reentrant.ErrNotAcquired):
				outcome = "not-acquired"
			case a.Err != nil:
				outcome = "error"
			}
			r.mu.Lock()
			if a.Held {
				r.holds++
			}
			r.mu.Unlock()
			r.add("end %s %s %s attempts=%d held=%v", a.Kind, a.Name, outcome, a.Attempts, a.Held)
		},
		HoldEnded: func(_ context.Context, e reentrant.HoldEnd) {
			r.mu.Lock()
			r.holds--
			r.mu.Unlock()
			switch {
			case e.Cause == nil:
				r.add("released %s %s", e.Kind, e.Name)
			case errors.Is(e.Cause, reentrant.ErrLockLost):
				r.add("lost %s %s", e.Kind, e.Name)
			default:
				r.add("ended %s %s: %v", e.Kind, e.Name, e.Cause)
			}
		},
		Renewed: func(rn reentrant.Renewal) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.renew = append(r.renew, rn)
		},
		Woken: func(_ context.Context, kind reentrant.Kind, name string) { r.add("woken %s %s", kind, name) },
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

func (r *recorder) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holds
}

// Each hook hears what happened, in order, with the holds in progress
// balanced: taken, refused, woken, released, lost, renewed, and closed.
func TestHooks(t *testing.T) {
	e := onRedis(t)
	var rec recorder
	c := e.client(t, reentrant.Options{Hooks: rec.hooks(), WatchdogTimeout: 1500 * time.Millisecond})
	other := e.client(t)
	// Every wait is bounded far below the package's timeout: a failure
	// says which call hung.
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()

	// Taken, re-entered, refused, released.
	mu := c.FairLock("h")
	held, err := mu.Lock(ctx)
	require.NoError(t, err)
	again, err := mu.Lock(held)
	require.NoError(t, err)
	_, ok, err := mu.TryLock(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	assert.Equal(t, 2, rec.held())
	require.NoError(t, mu.Unlock(again))
	require.NoError(t, mu.Unlock(held))
	assert.Equal(t, []string{
		"start fair h", "end fair h ok attempts=1 held=true",
		"start fair h", "end fair h ok attempts=1 held=true",
		"start fair h", "end fair h not-acquired attempts=1 held=false",
		"released fair h", "released fair h",
	}, rec.take())
	assert.Equal(t, 0, rec.held())

	// A waiter is woken by the release, and takes the lock at its third
	// attempt: the first found it held, the second followed the
	// subscription (a release in between would have gone unheard).
	theirs, err := other.Lock("w").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, e.do(t, "CONFIG", "RESETSTAT").Error())
	got := make(chan error, 1)
	var mine context.Context
	go func() {
		var err error
		mine, err = c.Lock("w").Lock(ctx)
		got <- err
	}()
	eventually(t, "the waiter's attempt after it subscribed", func() bool { return e.server.ScriptCalls() == 2 })
	require.NoError(t, other.Lock("w").Unlock(theirs))
	require.NoError(t, recv(t, got))
	require.NoError(t, c.Lock("w").Unlock(mine))
	assert.Equal(t, []string{
		"start lock w", "woken lock w", "end lock w ok attempts=3 held=true", "released lock w",
	}, rec.take())

	// The watchdog renews a hold, then finds it gone.
	rec.mu.Lock()
	rec.renew = nil
	rec.mu.Unlock()
	lost, err := c.Lock("l").Lock(ctx)
	require.NoError(t, err)
	eventually(t, "a renewal", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.renew) > 0
	})
	rec.mu.Lock()
	first := rec.renew[0]
	rec.mu.Unlock()
	assert.Equal(t, reentrant.Renewal{Holds: 1, Duration: first.Duration, Lag: first.Lag, TTL: 1500 * time.Millisecond}, first)
	e.do(t, "DEL", "l")
	recv(t, lost.Done())
	require.ErrorIs(t, context.Cause(lost), reentrant.ErrLockLost, "the hold was lost, not the test's time")
	assert.Equal(t, []string{"start lock l", "end lock l ok attempts=1 held=true", "lost lock l"}, rec.take())
	assert.Equal(t, 0, rec.held())
	rec.mu.Lock()
	last := rec.renew[len(rec.renew)-1]
	rec.mu.Unlock()
	assert.Equal(t, 1, last.Failed, "the round that found it gone counts it")

	// A permit, and a semaphore's plain acquire, which holds nothing.
	permit, err := c.PermitExpirableSemaphore("p").Acquire(ctx, reentrant.NoWait())
	require.ErrorIs(t, err, reentrant.ErrNotAcquired, "no permits set")
	require.Nil(t, permit)
	_, err = c.PermitExpirableSemaphore("p").TrySetPermits(ctx, 1)
	require.NoError(t, err)
	permit, err = c.PermitExpirableSemaphore("p").Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, permit.Release(ctx))
	_, err = c.Semaphore("s").TrySetPermits(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, c.Semaphore("s").Acquire(ctx, 1))
	assert.Equal(t, []string{
		"start permit-semaphore p", "end permit-semaphore p not-acquired attempts=1 held=false",
		"start permit-semaphore p", "end permit-semaphore p ok attempts=1 held=true", "released permit-semaphore p",
		"start semaphore s", "end semaphore s ok attempts=1 held=false",
	}, rec.take())

	// Close ends what is still held.
	_, err = c.Lock("c").Lock(ctx)
	require.NoError(t, err)
	rec.take()
	require.NoError(t, c.Close())
	assert.Equal(t, []string{"ended lock c: relock: " + reentrant.ErrClosed.Error()}, rec.take())
	assert.Equal(t, 0, rec.held())
}

// Hooks and OnLockLost that panic on relock's own goroutines (the
// watchdog's loop) are recovered: renewals go on, a loss is still told to
// the held context, and the first panic of each is logged with its stack,
// the next ones without it.
func TestPanickingHooksAreRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		m, c, renewals := fakeTimeClient(t, reentrant.Options{
			Logger:     slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnLockLost: func(string, reentrant.Owner, error) { panic("OnLockLost's bug") },
			Hooks: reentrant.Hooks{
				Renewed:   func(reentrant.Renewal) { panic("Renewed's bug") },
				HoldEnded: func(context.Context, reentrant.HoldEnd) { panic("HoldEnded's bug") },
			},
		})
		held, err := c.Lock("hooked").Lock(bg())
		require.NoError(t, err)
		time.Sleep(time.Minute)
		synctest.Wait()
		require.NoError(t, held.Err(), "renewals go on after the hook's panics")
		assert.GreaterOrEqual(t, renewals.Load(), int64(5))

		m.Del("hooked") // the hold vanishes: the next renewal finds it lost
		<-held.Done()
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
		synctest.Wait()
		out := logs.String()
		for _, name := range []string{"Hooks.Renewed", "Hooks.HoldEnded", "Options.OnLockLost"} {
			stacks := 0
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "callback="+name+" ") && strings.Contains(line, "stack=") {
					stacks++
				}
			}
			assert.Equal(t, 1, stacks, name+"'s stack logged once")
		}
		assert.Contains(t, out, "a callback panicked again", "later panics of Renewed are logged too, without a stack")
	})
}
