package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// A holder paused past its lease resumes and unlocks after another owner
// took the lock: for every kind, the late Unlock answers that the lock was
// lost and leaves the new holder's hold as it was, which it then releases
// as usual. (The pause is the key's expiry in Redis while the old
// holder's client still believes it holds the lock for an hour.)
func TestLateUnlockSparesNextHolder(t *testing.T) {
	e := onRedis(t)
	late, next := e.client(t), e.client(t)
	kinds := []struct {
		name string
		lock func(c *reentrant.Client) *reentrant.Lock
	}{
		{"plain", func(c *reentrant.Client) *reentrant.Lock { return c.Lock("late-plain") }},
		{"fenced", func(c *reentrant.Client) *reentrant.Lock { return c.FencedLock("late-fenced") }},
		{"fair", func(c *reentrant.Client) *reentrant.Lock { return c.FairLock("late-fair") }},
		{"priority", func(c *reentrant.Client) *reentrant.Lock { return c.PriorityLock("late-priority") }},
		{"write", func(c *reentrant.Client) *reentrant.Lock { return c.ReadWriteLock("late-rw").WriteLock() }},
		{"read", func(c *reentrant.Client) *reentrant.Lock { return c.ReadWriteLock("late-rw2").ReadLock() }},
		{"group", func(c *reentrant.Client) *reentrant.Lock { return c.GroupLock("late-group", "v") }},
		{"non-reentrant", func(c *reentrant.Client) *reentrant.Lock { return c.NonReentrantLock("late-nr") }},
		{"spin", func(c *reentrant.Client) *reentrant.Lock {
			return c.SpinLock("late-spin", reentrant.Backoff{Max: 10 * time.Millisecond})
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			first := k.lock(late)
			name := first.Name()
			stale, err := first.Lock(bg(), reentrant.LeaseFor(time.Hour))
			require.NoError(t, err)
			e.do(t, "PEXPIRE", name, "1") // the pause: the lease ran out
			eventually(t, "the old hold to expire", func() bool { return e.int(t, "EXISTS", name) == 0 })

			ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
			defer cancel()
			held, err := k.lock(next).Lock(ctx)
			require.NoError(t, err, "the next owner takes it")
			before, err := e.do(t, "HGETALL", name).AsStrMap()
			require.NoError(t, err)
			require.NotEmpty(t, before)

			err = first.Unlock(stale)
			assert.ErrorIs(t, err, reentrant.ErrLockLost, "the late Unlock says the lock was lost")
			after, err := e.do(t, "HGETALL", name).AsStrMap()
			require.NoError(t, err)
			assert.Equal(t, before, after, "the next holder's hold is untouched")
			assert.Positive(t, e.int(t, "PTTL", name), "and keeps its TTL")
			assert.NoError(t, held.Err(), "its held context goes on")
			require.NoError(t, k.lock(next).Unlock(held))
			assert.Zero(t, e.int(t, "EXISTS", name))
		})
	}
}
