package reentrant_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// lockedWithin runs mu.Lock in the background and returns what it
// returns, failing the test if that takes longer than limit.
func lockedWithin(t *testing.T, limit time.Duration, lock func() (context.Context, error)) context.Context {
	t.Helper()
	type result struct {
		held context.Context
		err  error
	}
	done := make(chan result, 1)
	go func() {
		held, err := lock()
		done <- result{held, err}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.held
	case <-time.After(limit):
		t.Fatalf("not acquired within %v", limit)
		return nil
	}
}

// A group lock takes its values all at once or waits: handles whose values
// overlap exclude each other, disjoint ones do not, re-entry counts every
// value, and a release wakes a waiter on the group's channel, not its
// re-poll (a minute here) or the holder's TTL (30s).
func TestGroupLock(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a := e.client(t)
		b := e.client(t, reentrant.Options{RepollInterval: time.Minute})
		held, err := a.GroupLock("class_100", "Jack_001", "Mary_002").Lock(bg())
		require.NoError(t, err)
		owner, _ := reentrant.OwnerFrom(held)
		assert.Equal(t, owner.String(), mustString(t, e, "HGET", "class_100", scripts.GroupField("Jack_001")))
		assert.Equal(t, "1", mustString(t, e, "HGET", "class_100", scripts.GroupField("Mary_002")+":"+owner.String()+":lock_count"))

		_, ok, err := b.GroupLock("class_100", "Mary_002", "Tom_003").TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok, "Mary_002 is held")
		assert.Zero(t, e.int(t, "HEXISTS", "class_100", scripts.GroupField("Tom_003")), "all or none")
		tom, ok, err := b.GroupLock("class_100", "Tom_003").TryLock(bg())
		require.NoError(t, err)
		require.True(t, ok, "a disjoint value")

		info, err := b.Inspect(bg(), "class_100")
		require.NoError(t, err)
		assert.Equal(t, reentrant.KindGroup, info.Kind)
		require.Len(t, info.Holders, 3, "one per value")
		for _, h := range info.Holders {
			assert.Equal(t, map[bool]string{true: owner.String(), false: tomOwner(tom)}[h.Value != scripts.GroupField("Tom_003")], h.Owner)
			assert.Equal(t, int64(1), h.Count)
			assert.WithinDuration(t, time.Now().Add(30*time.Second), h.Deadline, 5*time.Second)
		}

		again, err := a.GroupLock("class_100", "Mary_002", "Jack_001", "Mary_002").Lock(held)
		require.NoError(t, err, "the same values, in another order, repeated: the same lock")
		n, err := a.GroupLock("class_100", "Jack_001", "Mary_002").HoldCount(held)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		locked, err := b.GroupLock("class_100", "Jack_001").IsLocked(bg())
		require.NoError(t, err)
		assert.True(t, locked)
		left, err := b.GroupLock("class_100", "Jack_001", "Tom_003").RemainTTL(bg())
		require.NoError(t, err)
		assert.InDelta(t, 30*time.Second, left, float64(5*time.Second))

		waiter := b.GroupLock("class_100", "Jack_001")
		released := make(chan struct{})
		go func() {
			defer close(released)
			time.Sleep(50 * time.Millisecond) // usually after the waiter's first attempt; either order must work
			assert.NoError(t, a.GroupLock("class_100", "Jack_001", "Mary_002").Unlock(again))
			assert.NoError(t, a.GroupLock("class_100", "Jack_001", "Mary_002").Unlock(held))
		}()
		jack := lockedWithin(t, 10*time.Second, func() (context.Context, error) { return waiter.Lock(bg()) })
		recv(t, released)
		assert.ErrorIs(t, context.Cause(held), context.Canceled, "released")

		require.NoError(t, waiter.Unlock(jack))
		require.NoError(t, b.GroupLock("class_100", "Tom_003").Unlock(tom))
		assert.Zero(t, e.int(t, "EXISTS", "class_100"), "nothing left behind")
		locked, err = b.GroupLock("class_100", "Jack_001").IsLocked(bg())
		require.NoError(t, err)
		assert.False(t, locked)
	})
}

func tomOwner(held context.Context) string {
	o, _ := reentrant.OwnerFrom(held)
	return o.String()
}

// Three value sets of which any two overlap, taken by three clients over
// and over: never two holders at once.
func TestGroupLockExcludes(t *testing.T) {
	e := onRedis(t)
	var locks []*reentrant.Lock
	for _, vs := range [][]string{{"x", "y"}, {"y", "z"}, {"z", "x"}} {
		locks = append(locks, e.client(t).GroupLock("tri", vs...))
	}
	overlaps, entries := contend(t, locks, 50)
	assert.Zero(t, overlaps)
	assert.Equal(t, int64(150), entries)
	assert.Zero(t, e.int(t, "EXISTS", "tri"))
}

// The watchdog keeps a group lock's values past its timeout, renewal after
// renewal, and another client cannot take them meanwhile.
func TestGroupLockWatchdog(t *testing.T) {
	e := onRedis(t)
	var rounds atomic.Int64
	c := e.client(t, reentrant.Options{WatchdogTimeout: time.Second, Hooks: reentrant.Hooks{Renewed: func(r reentrant.Renewal) {
		if r.Holds == 1 && r.Failed == 0 {
			rounds.Add(1)
		}
	}}})
	mu := c.GroupLock("g", "a", "b")
	held, err := mu.Lock(bg())
	require.NoError(t, err)
	eventually(t, "four renewals: more than the 1s timeout", func() bool { return rounds.Load() >= 4 })
	require.NoError(t, held.Err())
	_, ok, err := e.client(t).GroupLock("g", "b").TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok)
	left, err := mu.RemainTTL(bg())
	require.NoError(t, err)
	assert.Positive(t, left)
	require.NoError(t, mu.Unlock(held))
}

// ForceUnlock frees the handle's values whoever holds them; the holder's
// watchdog (1s here) finds its hold of them gone, and a hold of other
// values of the group lives on.
func TestGroupLockForceUnlock(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t, reentrant.Options{WatchdogTimeout: time.Second})
		ab, err := c.GroupLock("g", "a", "b").Lock(bg())
		require.NoError(t, err)
		other, err := c.GroupLock("g", "z").Lock(bg())
		require.NoError(t, err)
		freed, err := e.client(t).GroupLock("g", "b").ForceUnlock(bg())
		require.NoError(t, err)
		assert.True(t, freed)
		eventually(t, "the lost hold ended", func() bool { return ab.Err() != nil })
		_, ok, err := e.client(t).GroupLock("g", "b").TryLock(bg())
		require.NoError(t, err)
		assert.True(t, ok, "b is free")
		assert.ErrorIs(t, c.GroupLock("g", "a", "b").Unlock(ab), reentrant.ErrLockLost)
		assert.NoError(t, other.Err())
		require.NoError(t, c.GroupLock("g", "z").Unlock(other))
	})
}

// A group lock with no values, or from a nil client, is refused.
func TestGroupLockInvalid(t *testing.T) {
	c := onMiniredis(t).client(t)
	_, err := c.GroupLock("g").Lock(bg())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	_, _, err = c.GroupLock("g").TryLock(bg())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	assert.ErrorIs(t, c.GroupLock("g").Unlock(bg()), reentrant.ErrInvalidArgument)
	_, err = c.GroupLock("", "a").Lock(bg())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	var nilClient *reentrant.Client
	_, err = nilClient.GroupLock("g", "a").Lock(bg())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}

// A Go service and a Java one share a group lock: each finds the other's
// values held and takes them once given back, and a Java release wakes a
// Go waiter at once (its re-poll is a minute, Java's lease 30s).
func TestGroupRedissonInterop(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	c := e.client(t, reentrant.Options{RepollInterval: time.Minute})
	wait, err := java.GroupTryAcquire(bg(), "class_100", 1, []string{"Jack_001", "Mary_002"})
	require.NoError(t, err)
	require.Zero(t, wait)

	_, ok, err := c.GroupLock("class_100", "Mary_002").TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "Go finds Java's value held")
	javaDone := make(chan struct{})
	go func() {
		defer close(javaDone)
		time.Sleep(50 * time.Millisecond)
		freed, err := java.GroupUnlock(bg(), "class_100", 1, []string{"Jack_001", "Mary_002"})
		if assert.NoError(t, err) && assert.NotNil(t, freed) {
			assert.True(t, *freed)
		}
	}()
	mu := c.GroupLock("class_100", "Mary_002", "Tom_003")
	held := lockedWithin(t, 10*time.Second, func() (context.Context, error) { return mu.Lock(bg()) })
	recv(t, javaDone)

	wait, err = java.GroupTryAcquire(bg(), "class_100", 1, []string{"Tom_003"})
	require.NoError(t, err)
	assert.InDelta(t, 30*time.Second, wait, float64(5*time.Second), "Java finds Go's value held, for the watchdog's lease")
	renewed, err := java.GroupRenew(bg(), "class_100", 1, []string{"Tom_003"})
	require.NoError(t, err)
	assert.False(t, renewed, "Java's renewal leaves Go's hold alone")
	freed, err := java.GroupUnlock(bg(), "class_100", 1, []string{"Tom_003"})
	require.NoError(t, err)
	assert.Nil(t, freed, "Java cannot release Go's hold")
	require.NoError(t, held.Err())

	goDone := make(chan struct{})
	go func() {
		defer close(goDone)
		time.Sleep(50 * time.Millisecond)
		assert.NoError(t, mu.Unlock(held))
	}()
	require.NoError(t, java.GroupLock(bg(), "class_100", 2, []string{"Tom_003"}), "Java takes it once Go gives it back")
	recv(t, goDone)
	freed, err = java.GroupUnlock(bg(), "class_100", 2, []string{"Tom_003"})
	require.NoError(t, err)
	require.NotNil(t, freed)
	assert.True(t, *freed)
	assert.Zero(t, e.int(t, "EXISTS", "class_100"))
}

// A release announces each value it frees on that value's channel, and
// "00" on Redisson's channel (Java's waiters read it as 0, relock's let
// it pass). So two waiters of one client for different values, each held
// by another client, are each woken by the release of their own value:
// neither waits out its re-poll (a minute here) or the holder's TTL.
func TestGroupWakesByValue(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		holders, waiters := e.client(t), e.client(t, reentrant.Options{RepollInterval: time.Minute})
		redisson := e.subscribe(t, scripts.LockChannel("g"))
		valueX := e.subscribe(t, scripts.GroupValueChannel("g", scripts.GroupField("x")))
		x, err := holders.GroupLock("g", "x").Lock(bg())
		require.NoError(t, err)
		y, err := holders.GroupLock("g", "y").Lock(bg())
		require.NoError(t, err)

		type result struct {
			held context.Context
			err  error
		}
		got := map[string]chan result{"x": make(chan result, 1), "y": make(chan result, 1)}
		for v, ch := range got {
			go func() {
				held, err := waiters.GroupLock("g", v).Lock(bg())
				ch <- result{held, err}
			}()
		}
		listeners := func(v string) int64 {
			r, err := e.do(t, "PUBSUB", "NUMSUB", scripts.GroupValueChannel("g", scripts.GroupField(v))).ToArray()
			if err != nil || len(r) != 2 {
				return -1
			}
			n, _ := r[1].AsInt64()
			return n
		}
		eventually(t, "both waiters listening", func() bool {
			return listeners("x") == 2 && listeners("y") == 1 // x: the waiter and this test
		})
		for _, v := range []string{"x", "y"} {
			held := map[string]context.Context{"x": x, "y": y}[v]
			require.NoError(t, holders.GroupLock("g", v).Unlock(held))
			select {
			case r := <-got[v]:
				require.NoError(t, r.err, v)
				require.NoError(t, waiters.GroupLock("g", v).Unlock(r.held))
			case <-time.After(10 * time.Second):
				t.Fatalf("the waiter for %s was not woken by its release", v)
			}
		}
		assert.Equal(t, "0", receive(t, valueX))
		assert.Equal(t, "00", receive(t, redisson))
	})
}
