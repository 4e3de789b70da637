package reentrant_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// RetryCount(n) makes exactly 1+n attempts, each one script call, whether
// retries wait for a wake-up (the attempt right after subscribing counts)
// or come at fixed delays.
func TestRetryCountAttempts(t *testing.T) {
	e := onRedis(t)
	// Attempts counted by the hook: a stray wake-up that reaches the client
	// once its waiter has gone is passed on by a script that is not one.
	var attempts atomic.Int64
	c := e.client(t, reentrant.Options{RepollInterval: time.Minute, Hooks: reentrant.Hooks{
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) { attempts.Store(int64(a.Attempts)) },
	}})
	holder := e.client(t)
	held, err := holder.Lock("busy").Lock(bg(), reentrant.LeaseFor(time.Minute)) // no renewals
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		opts    []reentrant.LockOption
		retries int64
	}{
		{"waiting for wake-ups", []reentrant.LockOption{reentrant.RetryCount(3)}, 3},
		{"at fixed delays", []reentrant.LockOption{reentrant.RetryCount(3), reentrant.RetryDelay(time.Millisecond)}, 3},
		{"no retries", []reentrant.LockOption{reentrant.RetryCount(0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Wake-ups that find the lock still held: each makes the waiter
			// try again at once (a waiter's re-poll here is a minute).
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
						e.do(t, "PUBLISH", wakeChannel(c, "busy"), "0") // the holder is relock's: c hears on its own channel
					}
				}
			}()
			ctx, cancel := context.WithTimeout(bg(), time.Minute)
			defer cancel()
			_, err := c.Lock("busy").Lock(ctx, tc.opts...)
			require.ErrorIs(t, err, reentrant.ErrNotAcquired)
			assert.Equal(t, 1+tc.retries, attempts.Load(), "attempts")
		})
	}
	require.NoError(t, holder.Lock("busy").Unlock(held))
}
