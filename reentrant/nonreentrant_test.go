package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
)

// refusesReentry checks that mu's holder is refused at once, by Lock and
// by TryLock, with ErrReentry, and that its one hold lives on as it was.
func refusesReentry(t *testing.T, mu *reentrant.Lock, held context.Context) {
	t.Helper()
	_, err := mu.Lock(held)
	assert.ErrorIs(t, err, reentrant.ErrReentry)
	_, ok, err := mu.TryLock(held)
	assert.ErrorIs(t, err, reentrant.ErrReentry)
	assert.False(t, ok)
	n, err := mu.HoldCount(held)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one hold, as before the refused re-entries")
	assert.NoError(t, held.Err(), "the hold lives on")
}

// A non-reentrant lock refuses its own holder at once, by Lock and by
// TryLock, and the one hold stays as it was; a call with a context that
// carries no owner is another owner, and waits like anyone else until the
// hold is given back.
func TestNonReentrantLock(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		mu := c.NonReentrantLock("single")
		held, err := mu.Lock(bg())
		require.NoError(t, err)

		refusesReentry(t, mu, held)
		owner, _ := reentrant.OwnerFrom(held)
		count, err := e.do(t, "HGET", "single", owner.String()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "1", count)

		_, ok, err := mu.TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok, "a context with no owner is another owner: the lock is held")
		require.NoError(t, mu.Unlock(held))
		other, err := mu.Lock(bg())
		require.NoError(t, err)
		require.NoError(t, mu.Unlock(other))
		assert.Zero(t, e.int(t, "EXISTS", "single"))
	})
}

// A Go service and a Java one share a non-reentrant lock: each waits for
// the other's hold, and each refuses its own holder's re-entry.
func TestNonReentrantRedissonInterop(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	const name = "shared-single"
	mu := e.client(t).NonReentrantLock(name)

	held, err := mu.Lock(bg())
	require.NoError(t, err)
	pttl, err := java.TryAcquireNonReentrant(bg(), name, 1)
	require.NoError(t, err)
	assert.Positive(t, pttl, "Java finds it held")
	require.NoError(t, mu.Unlock(held))

	pttl, err = java.TryAcquireNonReentrant(bg(), name, 1)
	require.NoError(t, err)
	require.Zero(t, pttl, "Java takes it once free")
	_, err = java.TryAcquireNonReentrant(bg(), name, 1)
	assert.ErrorIs(t, err, redissontest.ErrReacquire, "and refuses its own re-entry")
	_, ok, err := mu.TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "Go finds it held")
	released, err := java.Unlock(bg(), name, 1)
	require.NoError(t, err)
	assert.True(t, released)
	assert.Zero(t, e.int(t, "EXISTS", name))
}

// A non-reentrant fair lock refuses its own holder at once, without
// joining the queue; another owner queues and is handed the lock in turn.
func TestNonReentrantFairLock(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, quiet)
	mu := c.NonReentrantFairLock("fair-single")
	held, err := mu.Lock(bg())
	require.NoError(t, err)

	refusesReentry(t, mu, held)
	assert.Zero(t, e.int(t, "EXISTS", "redisson_lock_queue:{fair-single}"), "a refused re-entry does not queue")

	waiter := async(func() error {
		h, err := mu.Lock(bg())
		if err == nil {
			err = mu.Unlock(h)
		}
		return err
	})
	eventually(t, "the other owner to queue", func() bool {
		return e.int(t, "LLEN", "redisson_lock_queue:{fair-single}") == 1
	})
	require.NoError(t, mu.Unlock(held))
	within(t, waiter, 10*time.Second, "the next owner is handed the lock")
	assert.Zero(t, e.int(t, "EXISTS", "fair-single"))
}

// A Go service and a Java one share a non-reentrant fair lock: one queue,
// and each refuses its own holder's re-entry.
func TestNonReentrantFairRedissonInterop(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	const name = "shared-fair-single"
	mu := e.client(t).NonReentrantFairLock(name)

	held, err := mu.Lock(bg())
	require.NoError(t, err)
	acquired, ttl, err := java.FairTryAcquireNonReentrant(bg(), name, 1, 0, true)
	require.NoError(t, err)
	assert.False(t, acquired)
	assert.Positive(t, ttl, "Java finds it held, and queues")
	assert.Equal(t, int64(1), e.int(t, "LLEN", "redisson_lock_queue:{"+name+"}"))
	require.NoError(t, mu.Unlock(held))

	acquired, _, err = java.FairTryAcquireNonReentrant(bg(), name, 1, 0, true)
	require.NoError(t, err)
	require.True(t, acquired, "Java, at the head, takes it once free")
	_, _, err = java.FairTryAcquireNonReentrant(bg(), name, 1, 0, true)
	assert.ErrorIs(t, err, redissontest.ErrReacquire, "and refuses its own re-entry")
	_, ok, err := mu.TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "Go finds it held")
	released, err := java.FairUnlock(bg(), name, 1)
	require.NoError(t, err)
	assert.True(t, released)
	assert.Zero(t, e.int(t, "EXISTS", name))
}
