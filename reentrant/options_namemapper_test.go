package reentrant_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
)

// prefixed is a NameMapper such as a Java service's: every name under
// "svc:".
func prefixed(name string) string { return "svc:" + name }

// A NameMapper maps each name once, to the key every other key and channel
// derives from; handles keep the name as given; a Java client that maps
// the same way shares the locks.
func TestNameMapper(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t, reentrant.Options{NameMapper: prefixed})
		keys := func() []string {
			t.Helper()
			ks, err := e.do(t, "KEYS", "*").AsStrSlice()
			require.NoError(t, err)
			return ks
		}

		mu := c.Lock("orders")
		assert.Equal(t, "orders", mu.Name())
		held, err := mu.Lock(bg())
		require.NoError(t, err)
		assert.Equal(t, []string{"svc:orders"}, keys())
		again, err := c.Lock(mu.Name()).Lock(held)
		require.NoError(t, err, "a handle made from Name is the same lock: mapped once")
		require.NoError(t, c.Lock(mu.Name()).Unlock(again))
		info, err := c.Inspect(bg(), "orders")
		require.NoError(t, err)
		assert.Equal(t, "svc:orders", info.Name)
		assert.Equal(t, reentrant.KindLock, info.Kind)
		require.NoError(t, mu.Unlock(held))

		require.NoError(t, c.Do(bg(), "job", func(ctx context.Context) error {
			assert.Contains(t, keys(), "svc:job")
			return nil
		}))
		for _, k := range keys() { // the re-entry's release left an unlock latch
			assert.True(t, strings.Contains(k, "svc:"), "key %s derives from a mapped name", k)
		}

		fair := c.FairLock("queue")
		h1, err := fair.Lock(bg())
		require.NoError(t, err)
		_, ok, err := fair.TryLock(bg(), reentrant.WaitAtMost(50e6))
		require.NoError(t, err)
		assert.False(t, ok)
		for _, k := range keys() {
			assert.True(t, strings.Contains(k, "svc:queue"), "fair lock key %s derives from the mapped name", k)
		}
		require.NoError(t, fair.Unlock(h1))

		s := c.Semaphore("pool")
		assert.Equal(t, "pool", s.Name())
		_, err = s.TrySetPermits(bg(), 1)
		require.NoError(t, err)
		assert.Equal(t, int64(1), e.int(t, "GET", "svc:pool"))
		for _, name := range []string{c.CountDownLatch("l").Name(), c.RateLimiter("r").Name(), c.PermitExpirableSemaphore("p").Name(), c.ReadWriteLock("rw").WriteLock().Name()} {
			assert.False(t, strings.HasPrefix(name, "svc:"), "%s: Name is the name as given", name)
		}

		blank := e.client(t, reentrant.Options{NameMapper: func(string) string { return "" }})
		_, err = blank.Lock("x").Lock(bg())
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, "a mapper that gives no key")
	})
}

// A Java client whose NameMapper gives the same keys waits for the Go
// side's hold, on the channel of the mapped name.
func TestNameMapperWithRedisson(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{NameMapper: prefixed})
	java := redissontest.New(e.rdb(t))
	mu := c.Lock("shared")
	held, err := mu.Lock(bg())
	require.NoError(t, err)
	pttl, err := java.TryAcquire(bg(), prefixed("shared"), 1)
	require.NoError(t, err)
	assert.Positive(t, pttl, "Java, mapping the same way, finds it held")

	msgs := e.subscribe(t, "redisson_lock__channel:{svc:shared}")
	require.NoError(t, mu.Unlock(held))
	assert.Equal(t, "00", receive(t, msgs), "the release is published on the mapped name's channel")
	pttl, err = java.TryAcquire(bg(), prefixed("shared"), 1)
	require.NoError(t, err)
	assert.Zero(t, pttl, "and Java takes it")
}
