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

// expirable is what every synchronizer shares with Redisson's RObject and
// RExpirable.
type expirable interface {
	Delete(context.Context) (bool, error)
	Expire(context.Context, time.Duration) (bool, error)
	ClearExpire(context.Context) (bool, error)
	Exists(context.Context) (bool, error)
}

// Delete, Expire, ClearExpire and Exists act on every key of a
// synchronizer, as the Java class's overrides list them, and on nothing
// else.
func TestSynchronizerObjects(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		cases := []struct {
			what   string
			obj    expirable
			create func() error
			keys   []string // every key create makes
		}{
			{"semaphore", c.Semaphore("sem"), func() error {
				_, err := c.Semaphore("sem").TrySetPermits(bg(), 1)
				return err
			}, []string{"sem"}},
			{"permits", c.PermitExpirableSemaphore("pes"), func() error {
				_, err := c.PermitExpirableSemaphore("pes").TrySetPermits(bg(), 2)
				if err == nil {
					_, err = c.PermitExpirableSemaphore("pes").Acquire(bg(), reentrant.LeaseFor(time.Hour))
				}
				return err
			}, []string{"pes", "{pes}:timeout"}},
			{"latch", c.CountDownLatch("latch"), func() error {
				_, err := c.CountDownLatch("latch").TrySetCount(bg(), 1)
				return err
			}, []string{"latch"}},
			{"rate limiter", c.RateLimiter("rl"), func() error {
				err := c.RateLimiter("rl").SetRate(bg(), reentrant.Rate{Permits: 5, Interval: time.Hour})
				if err == nil {
					_, err = c.RateLimiter("rl").TryAcquire(bg(), 1)
				}
				return err
			}, []string{"rl", "{rl}:value", "{rl}:permits"}},
		}
		e.do(t, "SET", "bystander", "x")
		for _, tc := range cases {
			yes := func(f func() (bool, error), what string) {
				t.Helper()
				got, err := f()
				require.NoError(t, err, "%s: %s", tc.what, what)
				assert.True(t, got, "%s: %s", tc.what, what)
			}
			no := func(f func() (bool, error), what string) {
				t.Helper()
				got, err := f()
				require.NoError(t, err, "%s: %s", tc.what, what)
				assert.False(t, got, "%s: %s", tc.what, what)
			}
			ttls := func(what string, ok func(int64) bool) {
				t.Helper()
				for _, k := range tc.keys {
					pttl := e.int(t, "PTTL", k)
					assert.True(t, ok(pttl), "%s: %s: key %s PTTL %d", tc.what, what, k, pttl)
				}
			}
			exists := func() (bool, error) { return tc.obj.Exists(bg()) }
			expire := func() (bool, error) { return tc.obj.Expire(bg(), time.Minute) }
			clear := func() (bool, error) { return tc.obj.ClearExpire(bg()) }
			del := func() (bool, error) { return tc.obj.Delete(bg()) }

			no(exists, "exists before")
			no(expire, "expire before")
			no(del, "delete before")
			require.NoError(t, tc.create(), tc.what)
			yes(exists, "exists")
			ttls("made", func(p int64) bool { return p == -1 })
			yes(expire, "expire")
			ttls("expiring", func(p int64) bool { return p > 0 && p <= 60000 })
			yes(clear, "clear")
			ttls("cleared", func(p int64) bool { return p == -1 })
			no(clear, "clear again")
			_, err := tc.obj.Expire(bg(), 0)
			assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, tc.what)
			yes(del, "delete")
			no(exists, "exists after")
			ttls("deleted", func(p int64) bool { return p == -2 })
		}
		assert.Equal(t, "x", mustString(t, e, "GET", "bystander"), "another key untouched")
		assert.Equal(t, int64(-1), e.int(t, "PTTL", "bystander"))
	})
}

// A permit's holder learns that its semaphore was deleted at its
// watchdog's next renewal.
func TestPermitSemaphoreDeleted(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond})
	s := c.PermitExpirableSemaphore("gone")
	_, err := s.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	p, err := s.Acquire(bg())
	require.NoError(t, err)
	deleted, err := s.Delete(bg())
	require.NoError(t, err)
	require.True(t, deleted)
	select {
	case <-p.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the permit's context was not cancelled after its semaphore was deleted")
	}
}

// What Java's delete lists is what Go's Delete deletes, either way round:
// a permit semaphore with taken permits, and an OVERALL rate limiter in
// use.
func TestObjectsDeletedAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	java := redissontest.New(e.rdb(t))
	keys := func() []string {
		t.Helper()
		ks, err := e.do(t, "KEYS", "*").AsStrSlice()
		require.NoError(t, err)
		return ks
	}

	// Java makes them, Go deletes them.
	_, err := java.SemaphoreTrySetPermits(bg(), "pj", 2, 0)
	require.NoError(t, err)
	_, err = java.PermitAcquire(bg(), "pj", time.Hour)
	require.NoError(t, err)
	_, err = java.RateTrySetRate(bg(), "rj", false, 3, time.Hour, 0)
	require.NoError(t, err)
	_, err = java.RateTryAcquire(bg(), "rj", 1)
	require.NoError(t, err)
	require.Len(t, keys(), 5)
	for _, o := range []expirable{c.PermitExpirableSemaphore("pj"), c.RateLimiter("rj")} {
		deleted, err := o.Delete(bg())
		require.NoError(t, err)
		assert.True(t, deleted)
	}
	assert.Empty(t, keys(), "Go's Delete left some of Java's keys")

	// Go makes them, Java deletes them.
	pg := c.PermitExpirableSemaphore("pg")
	_, err = pg.TrySetPermits(bg(), 2)
	require.NoError(t, err)
	_, err = pg.Acquire(bg(), reentrant.LeaseFor(time.Hour))
	require.NoError(t, err)
	require.NoError(t, c.RateLimiter("rg").SetRate(bg(), reentrant.Rate{Permits: 3, Interval: time.Hour}))
	_, err = c.RateLimiter("rg").TryAcquire(bg(), 1)
	require.NoError(t, err)
	require.Len(t, keys(), 5)
	deleted, err := java.PermitDelete(bg(), "pg")
	require.NoError(t, err)
	assert.True(t, deleted)
	deleted, err = java.RateDelete(bg(), "rg")
	require.NoError(t, err)
	assert.True(t, deleted)
	assert.Empty(t, keys(), "Java's delete left some of Go's keys")
}
