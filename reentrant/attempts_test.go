package reentrant_test

import (
	"context"
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
	holder, c := e.client(t), e.patient(t)
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
			e.do(t, "CONFIG", "RESETSTAT")
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
						e.do(t, "PUBLISH", "redisson_lock__channel:{busy}", "0")
					}
				}
			}()
			ctx, cancel := context.WithTimeout(bg(), time.Minute)
			defer cancel()
			_, err := c.Lock("busy").Lock(ctx, tc.opts...)
			require.ErrorIs(t, err, reentrant.ErrNotAcquired)
			assert.Equal(t, 1+tc.retries, e.server.ScriptCalls(), "script calls")
		})
	}
	require.NoError(t, holder.Lock("busy").Unlock(held))
}
