package reentrant_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

const (
	fairQueue    = "redisson_lock_queue:{fair}"
	fairTimeouts = "redisson_lock_timeout:{fair}"
)

// serverMillis is Redis's clock, in milliseconds.
func serverMillis(t *testing.T, e env) int64 {
	tm, err := e.do(t, "TIME").AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}

// 20 waiters on two clients get the lock in the order they queued, and
// nothing is left in Redis afterwards.
func TestFairOrder(t *testing.T) {
	e := onRedis(t)
	clients := []*reentrant.Client{e.patient(t), e.patient(t)}
	held, err := clients[0].FairLock("fair").Lock(bg())
	require.NoError(t, err)

	const n = 20
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	var turns handoffs
	wctx, cancel := context.WithCancel(bg())
	defer cancel()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := clients[i%2].FairLock("fair")
			ctx, err := l.Lock(wctx)
			if !assert.NoError(t, err) {
				return
			}
			turns.took()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Unlock(ctx))
		}()
		eventually(t, "waiter "+strconv.Itoa(i)+" to queue", func() bool { return e.int(t, "LLEN", fairQueue) == int64(i+1) })
	}
	released := time.Now()
	require.NoError(t, clients[0].FairLock("fair").Unlock(held))
	waitAll(t, &wg, time.Minute, cancel)
	// A missed wake-up would leave a gap of a TTL (30s) or a re-poll (a
	// minute).
	assert.Less(t, turns.longest(released), 3*time.Second)
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, order, "arrival order")
	for _, k := range []string{"fair", fairQueue, fairTimeouts} {
		assert.Equal(t, int64(0), e.int(t, "EXISTS", k), k)
	}
}

// A waiter that died in the queue (nobody refreshes its deadline) is
// skipped once its wait timeout passes; the next waiter is not stranded.
func TestFairDeadWaiterSkipped(t *testing.T) {
	e := onRedis(t)
	const wait, repoll = 500 * time.Millisecond, 50 * time.Millisecond
	c := e.client(t, reentrant.Options{FairWaitTimeout: wait, RepollInterval: repoll})
	held, err := c.FairLock("fair").Lock(bg())
	require.NoError(t, err)
	// A crashed waiter, as a dead process leaves it: queued, never back.
	dead := "00000000-0000-4000-8000-000000000000:1"
	deadline := serverMillis(t, e) + wait.Milliseconds()
	e.do(t, "RPUSH", fairQueue, dead)
	e.do(t, "ZADD", fairTimeouts, strconv.FormatInt(deadline, 10), dead)

	got := make(chan time.Time, 1)
	go func() {
		ctx, err := c.FairLock("fair").Lock(bg())
		if assert.NoError(t, err) {
			at := time.Now()
			assert.NoError(t, c.FairLock("fair").Unlock(ctx))
			got <- at
		}
	}()
	eventually(t, "the live waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 2 })
	require.NoError(t, c.FairLock("fair").Unlock(held))
	select {
	case at := <-got:
		late := at.UnixMilli() - deadline
		t.Logf("acquired %dms after the dead waiter's deadline", late)
		assert.GreaterOrEqual(t, late, int64(-5), "not before the dead waiter's turn ran out (server clock)")
	case <-time.After(30 * time.Second):
		t.Fatal("live waiter stranded behind a dead one")
	}
	assert.Equal(t, int64(0), e.int(t, "EXISTS", fairQueue))
	assert.Equal(t, int64(0), e.int(t, "EXISTS", fairTimeouts))
}

// A waiter that gives up, by ctx or by a wait limit, leaves the queue at
// once; so does a TryLock that did not get the lock.
func TestFairGiveUpLeavesQueue(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	held, err := c.FairLock("fair").Lock(bg())
	require.NoError(t, err)
	_, ok, err := c.FairLock("fair").TryLock(bg())
	require.NoError(t, err)
	require.False(t, ok)
	assert.Equal(t, int64(0), e.int(t, "EXISTS", fairQueue), "TryLock left no queue entry")

	_, ok, err = c.FairLock("fair").TryLock(bg(), reentrant.WaitAtMost(20*time.Millisecond))
	require.NoError(t, err)
	require.False(t, ok)
	assert.Equal(t, int64(0), e.int(t, "EXISTS", fairQueue))

	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() { _, err := c.FairLock("fair").Lock(ctx); done <- err }()
	eventually(t, "the waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 1 })
	cancel()
	assert.ErrorIs(t, recv(t, done), context.Canceled)
	// An attempt in flight when ctx ended is heard out first: the waiter
	// leaves once its reply has come.
	eventually(t, "the waiter to leave", func() bool {
		return e.int(t, "EXISTS", fairQueue) == 0 && e.int(t, "EXISTS", fairTimeouts) == 0
	})
	require.NoError(t, c.FairLock("fair").Unlock(held))
}

// Both sides see one queue: a Java waiter queued first (written as
// Redisson writes it) keeps its turn ahead of a relock waiter, and a Java
// release tells the relock waiter on its own channel.
func TestFairRedissonQueue(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	held, err := c.FairLock("fair").Lock(bg())
	require.NoError(t, err)
	java := "6ba7b810-9dad-11d1-80b4-00c04fd430c8:42"
	e.do(t, "RPUSH", fairQueue, java)
	e.do(t, "ZADD", fairTimeouts, strconv.FormatInt(serverMillis(t, e)+300000, 10), java)

	got := make(chan error, 1)
	owner := c.NewOwner()
	ctx := reentrant.WithOwner(bg(), owner)
	go func() {
		h, err := c.FairLock("fair").Lock(ctx)
		if err == nil {
			err = c.FairLock("fair").Unlock(h)
		}
		got <- err
	}()
	eventually(t, "the relock waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 2 })
	queue, err := e.do(t, "LRANGE", fairQueue, "0", "-1").AsStrSlice()
	require.NoError(t, err)
	assert.Equal(t, []string{java, owner.String()}, queue)

	require.NoError(t, c.FairLock("fair").Unlock(held))
	select {
	case <-got:
		t.Fatal("the relock waiter jumped the Java waiter's turn")
	case <-time.After(100 * time.Millisecond):
	}
	// The Java waiter takes its turn and releases, as Redisson does.
	e.do(t, "LPOP", fairQueue)
	e.do(t, "ZREM", fairTimeouts, java)
	e.do(t, "HSET", "fair", java, "1")
	e.do(t, "DEL", "fair")
	e.do(t, "PUBLISH", "redisson_lock__channel:{fair}:"+owner.String(), "0")
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("relock waiter not told by the Java release")
	}
}

// When an attempt drops a head whose turn ran out while the lock is free,
// the new head is told at once: no release will announce its turn, and it
// may be asleep for the holder's whole TTL or a re-poll (a minute here).
func TestFairExpiredHeadHandsOn(t *testing.T) {
	e := onRedis(t)
	c, other := e.patient(t), e.patient(t)
	held, err := c.FairLock("fair").Lock(bg())
	require.NoError(t, err)
	// A crashed waiter ahead of the live one, its turn about to run out.
	dead := "00000000-0000-4000-8000-000000000000:1"
	deadline := serverMillis(t, e) + 300
	e.do(t, "RPUSH", fairQueue, dead)
	e.do(t, "ZADD", fairTimeouts, strconv.FormatInt(deadline, 10), dead)
	got := make(chan time.Time, 1)
	done := make(chan struct{})
	defer func() { recv(t, done) }() // the waiter's Unlock, before the client closes
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(bg(), time.Minute)
		defer cancel()
		h, err := c.FairLock("fair").Lock(ctx)
		if assert.NoError(t, err) {
			got <- time.Now()
			assert.NoError(t, c.FairLock("fair").Unlock(h))
		}
	}()
	eventually(t, "the live waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 2 })
	require.NoError(t, c.FairLock("fair").Unlock(held)) // tells the dead waiter
	eventually(t, "the dead waiter's turn to run out", func() bool { return serverMillis(t, e) > deadline })
	// Anyone's attempt drops the dead head; the lock is free and the turn
	// is the live waiter's.
	_, ok, err := other.FairLock("fair").TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "not the caller's turn")
	told := time.Now()
	select {
	case at := <-got:
		t.Logf("the new head took the lock %v after the dead one was dropped", at.Sub(told))
		assert.Less(t, at.Sub(told), 3*time.Second)
	case <-time.After(3 * time.Second):
		t.Fatal("the new head was not told its turn")
	}
}

// A waiter with a wait limit is given that limit as its turn, as Redisson's
// tryLock(waitTime) gives it, not Options.FairWaitTimeout (five minutes
// here): behind a waiter that died, the others wait a limit, not five
// minutes.
func TestFairTurnFollowsWaitLimit(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{FairWaitTimeout: 5 * time.Minute})
	held, err := c.FairLock("fair").Lock(bg())
	require.NoError(t, err)
	owner := c.NewOwner()
	done := async(func() error {
		_, _, err := c.FairLock("fair").TryLock(reentrant.WithOwner(bg(), owner), reentrant.WaitAtMost(2*time.Second))
		return err
	})
	eventually(t, "the waiter to queue", func() bool { return e.int(t, "ZCARD", fairTimeouts) == 1 })
	turn := deadline(t, e, owner.String()) - serverMillis(t, e) - e.int(t, "PTTL", "fair")
	// Three reads, not one instant: a few ms either way.
	assert.InDelta(t, 2000, turn, 500, "the turn is the wait limit")
	within(t, done, 10*time.Second, "the waiter gives up at its limit")
	require.NoError(t, c.FairLock("fair").Unlock(held))
}

// A waiter told "the lock is free, but the turn is another's" backs off
// (from 1ms, doubling up to the re-poll interval) instead of asking Redis
// again at once: behind a head that died, it makes a dozen attempts in the
// head's last second, not hundreds.
func TestFairNotYourTurnBacksOff(t *testing.T) {
	e := onRedis(t)
	var attempts atomic.Int64
	c := e.client(t, reentrant.Options{Hooks: reentrant.Hooks{
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) { attempts.Store(int64(a.Attempts)) },
	}})
	dead := "00000000-0000-4000-8000-000000000000:1"
	e.do(t, "RPUSH", fairQueue, dead)
	e.do(t, "ZADD", fairTimeouts, strconv.FormatInt(serverMillis(t, e)+time.Second.Milliseconds(), 10), dead)
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	held, err := c.FairLock("fair").Lock(ctx)
	require.NoError(t, err, "the dead head's turn ran out")
	require.NoError(t, c.FairLock("fair").Unlock(held))
	t.Logf("%d attempts", attempts.Load())
	assert.LessOrEqual(t, attempts.Load(), int64(20))
}
