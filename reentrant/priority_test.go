package reentrant_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

const (
	priorityQueue   = "relock_priority_queue:{prio}"
	priorityWaiters = "relock_priority_waiters:{prio}"
)

// arrivals returns the queued waiters' arrivals (µs, Redis's clock) and
// priorities, by owner.
func arrivals(t *testing.T, e env) map[string][2]int64 {
	records, err := e.do(t, "HGETALL", priorityWaiters).AsStrMap()
	require.NoError(t, err)
	got := map[string][2]int64{}
	for owner, r := range records {
		f := strings.Split(r, ":")
		if len(f) != 5 {
			continue // a grant's mark
		}
		p, _ := strconv.ParseInt(f[1], 10, 64)
		at, _ := strconv.ParseInt(f[2], 10, 64)
		got[owner] = [2]int64{at, p}
	}
	return got
}

// servedOrder runs waiters, one at a time, on clients in turn, each with
// its priority, while the lock is held; each waiter is queued before the
// next starts. Then the lock is released, and it returns the owners in the
// order they were served, and each one's arrival and priority.
func servedOrder(t *testing.T, e env, clients []*reentrant.Client, priorities []int) ([]string, map[string][2]int64) {
	held, err := clients[0].PriorityLock("prio").Lock(bg())
	require.NoError(t, err)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	wctx, cancel := context.WithCancel(bg())
	defer cancel()
	queued := map[string][2]int64{}
	for i, p := range priorities {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := clients[i%len(clients)].PriorityLock("prio")
			ctx, err := l.Lock(wctx, reentrant.Priority(p))
			if !assert.NoError(t, err) {
				return
			}
			owner, _ := reentrant.OwnerFrom(ctx)
			mu.Lock()
			order = append(order, owner.String())
			mu.Unlock()
			assert.NoError(t, l.Unlock(ctx))
		}()
		eventually(t, "waiter "+strconv.Itoa(i)+" to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == int64(i+1) })
		for owner, a := range arrivals(t, e) {
			queued[owner] = a
		}
	}
	require.NoError(t, clients[0].PriorityLock("prio").Unlock(held))
	waitAll(t, &wg, time.Minute, cancel)
	return order, queued
}

// Three priorities, three waiters each, on three clients (as separate
// processes have): served by priority, and within one by arrival. Nothing
// is left in Redis afterwards.
func TestPriorityServesInOrder(t *testing.T) {
	e := onRedis(t)
	opts := reentrant.Options{RepollInterval: time.Minute, PriorityAging: time.Hour} // arrivals here are ms apart
	clients := []*reentrant.Client{e.client(t, opts), e.client(t, opts), e.client(t, opts)}
	priorities := []int{0, 5, 9, 5, 0, 9, 0, 9, 5}
	order, queued := servedOrder(t, e, clients, priorities)
	require.Len(t, order, len(priorities))
	for i := 1; i < len(order); i++ {
		a, b := queued[order[i-1]], queued[order[i]]
		assert.True(t, a[1] > b[1] || a[1] == b[1] && a[0] < b[0],
			"served %d (priority %d, arrival %d) before %d (priority %d, arrival %d)", i-1, a[1], a[0], i, b[1], b[0])
	}
	for _, k := range []string{"prio", priorityQueue, priorityWaiters} {
		assert.Equal(t, int64(0), e.int(t, "EXISTS", k), k)
	}
}

// Aging bounds how far a waiter can be passed: with 20ms a level, a
// priority-0 waiter is passed only by priority-5 waiters that arrive
// within 100ms after it, however many keep coming, and it is served while
// they still come. Arrivals are bounded on this host's clock, which Redis
// reads too: a waiter arrives after its Lock call starts, and the low
// waiter before it is seen queued.
func TestPriorityAgingBound(t *testing.T) {
	e := onRedis(t)
	const aging, high = 20 * time.Millisecond, 5
	c := e.client(t, reentrant.Options{PriorityAging: aging})
	held, err := c.PriorityLock("prio").Lock(bg())
	require.NoError(t, err)

	stream, stop := context.WithTimeout(bg(), 20*time.Second) // served long before, unless aging is broken
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	type turn struct {
		call time.Time
		low  bool
	}
	var served []turn
	take := func(p int) {
		defer wg.Done()
		call := time.Now()
		l := c.PriorityLock("prio")
		ctx, err := l.Lock(stream, reentrant.Priority(p))
		if err != nil {
			return // the stream stopped
		}
		mu.Lock()
		served = append(served, turn{call, p == 0})
		mu.Unlock()
		if p == 0 {
			stop()
		}
		time.Sleep(5 * time.Millisecond) // work: time for the stream to queue more
		assert.NoError(t, l.Unlock(ctx))
	}
	// Three high waiters queued before the low one, and a stream after it
	// that keeps three queued.
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go take(high)
		eventually(t, "a high waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == int64(i+1) })
	}
	wg.Add(1)
	go take(0)
	eventually(t, "the low waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == 4 })
	lowQueued := time.Now()
	require.NoError(t, c.PriorityLock("prio").Unlock(held))
	for stream.Err() == nil {
		if e.int(t, "ZCARD", priorityQueue) < 4 {
			wg.Add(1)
			go take(high)
		}
		time.Sleep(time.Millisecond) // a stream of arrivals, not a wait for an event
	}
	waitAll(t, &wg, redistest.Within, func() {})

	mu.Lock()
	defer mu.Unlock()
	i := slices.IndexFunc(served, func(x turn) bool { return x.low })
	require.GreaterOrEqual(t, i, 0, "the low waiter was served while higher ones kept coming")
	passed := 0
	for _, x := range served[:i] {
		if x.call.After(lowQueued) {
			passed++
			assert.False(t, x.call.After(lowQueued.Add(high*aging)), "passed by a waiter that arrived %v after the low one was queued", x.call.Sub(lowQueued))
		}
	}
	t.Logf("the low waiter was served %dth, passed by %d later arrivals", i+1, passed)
}

// A waiter whose process died while queued (no attempt renews its place)
// is skipped once its window ends: max(WatchdogTimeout, 3 x RepollInterval).
func TestPriorityDeadWaiterSkipped(t *testing.T) {
	e := onRedis(t)
	const window = 600 * time.Millisecond
	c := e.client(t, reentrant.Options{WatchdogTimeout: window, RepollInterval: 50 * time.Millisecond})
	held, err := c.PriorityLock("prio").Lock(bg())
	require.NoError(t, err)
	// A crashed waiter, as a dead process leaves it: best placed, never back.
	dead := "00000000-0000-4000-8000-000000000000:1"
	alive := serverMillis(t, e) + window.Milliseconds()
	e.do(t, "ZADD", priorityQueue, "0", dead)
	e.do(t, "HSET", priorityWaiters, dead, strconv.FormatInt(alive, 10)+":255:0:0:0")

	got := make(chan time.Time, 1)
	go func() {
		ctx, err := c.PriorityLock("prio").Lock(bg())
		if assert.NoError(t, err) {
			at := time.Now()
			assert.NoError(t, c.PriorityLock("prio").Unlock(ctx))
			got <- at
		}
	}()
	eventually(t, "the live waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == 2 })
	require.NoError(t, c.PriorityLock("prio").Unlock(held))
	select {
	case at := <-got:
		late := at.UnixMilli() - alive
		t.Logf("acquired %dms after the dead waiter's window ended", late)
		assert.GreaterOrEqual(t, late, int64(-5), "not before the dead waiter's window ended (server clock)")
	case <-time.After(30 * time.Second):
		t.Fatal("live waiter stranded behind a dead one")
	}
	for _, k := range []string{"prio", priorityQueue, priorityWaiters} {
		assert.Equal(t, int64(0), e.int(t, "EXISTS", k), k)
	}
}

// A waiter whose ctx ends leaves the queue at once, and the next is served
// on the release; a TryLock without a wait never queues, and one with a
// wait leaves when it gives up.
func TestPriorityGiveUpLeavesQueue(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	held, err := c.PriorityLock("prio").Lock(bg())
	require.NoError(t, err)
	_, ok, err := c.PriorityLock("prio").TryLock(bg(), reentrant.Priority(255))
	require.NoError(t, err)
	require.False(t, ok)
	assert.Equal(t, int64(0), e.int(t, "EXISTS", priorityQueue), "TryLock left no queue entry")
	_, ok, err = c.PriorityLock("prio").TryLock(bg(), reentrant.WaitAtMost(20*time.Millisecond))
	require.NoError(t, err)
	require.False(t, ok)
	assert.Equal(t, int64(0), e.int(t, "EXISTS", priorityQueue))

	ctx, cancel := context.WithCancel(bg())
	gaveUp := async(func() error { _, err := c.PriorityLock("prio").Lock(ctx, reentrant.Priority(9)); return err })
	eventually(t, "the high waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == 1 })
	next := async(func() error {
		h, err := c.PriorityLock("prio").Lock(bg())
		if err == nil {
			err = c.PriorityLock("prio").Unlock(h)
		}
		return err
	})
	eventually(t, "the low waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == 2 })
	cancel()
	select {
	case err := <-gaveUp:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the high waiter did not give up")
	}
	eventually(t, "the high waiter to leave", func() bool { return e.int(t, "ZCARD", priorityQueue) == 1 })
	require.NoError(t, c.PriorityLock("prio").Unlock(held))
	// The patient client re-polls once a minute: only the release's
	// message, or its grant, serves the next waiter in time.
	within(t, next, 10*time.Second, "the next waiter is served")
}

// A priority lock is reentrant: a re-entry never queues, even behind
// waiters.
func TestPriorityReentrant(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	l := c.PriorityLock("prio")
	ctx := bg()
	var held []context.Context
	for depth := 1; depth <= 3; depth++ {
		h, err := l.Lock(ctx)
		require.NoError(t, err)
		held = append(held, h)
		ctx = h
		if depth == 1 {
			go func() { h, err := l.Lock(bg(), reentrant.Priority(255)); _ = err; _ = l.Unlock(h) }()
			eventually(t, "a waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == 1 })
		}
		n, err := l.HoldCount(h)
		require.NoError(t, err)
		assert.Equal(t, depth, n)
	}
	for depth := 3; depth >= 1; depth-- {
		require.NoError(t, l.Unlock(held[depth-1]))
	}
	eventually(t, "the waiter to be served and done", func() bool { return e.int(t, "EXISTS", "prio") == 0 && e.int(t, "EXISTS", priorityQueue) == 0 })
}

// Priority out of range, or given to another kind, is refused before
// anything is sent.
func TestPriorityInvalid(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	for _, p := range []int{-1, 256} {
		_, err := c.PriorityLock("prio").Lock(bg(), reentrant.Priority(p))
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, "Priority(%d)", p)
	}
	for _, l := range []*reentrant.Lock{c.Lock("x"), c.FairLock("x"), c.FencedLock("x"), c.SpinLock("x", reentrant.Backoff{}), c.ReadWriteLock("x").WriteLock()} {
		for _, p := range []int{3, 0} { // the default too: never silently ignored
			_, _, err := l.TryLock(bg(), reentrant.Priority(p))
			assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
			assert.ErrorContains(t, err, fmt.Sprintf("Priority(%d) is for a PriorityLock", p))
		}
	}
	_, err := c.Semaphore("s").TryAcquire(bg(), 1, reentrant.Priority(1))
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	assert.Equal(t, int64(0), e.int(t, "DBSIZE"), "nothing was written")
	_, err = reentrant.New(e.rdb(t), reentrant.Options{PriorityAging: -time.Second})
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}

// Inspect shows a priority lock's holder and its queue in the order it
// will be served, with each waiter's priority and arrival.
func TestPriorityInspect(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	held, err := c.PriorityLock("prio").Lock(bg())
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(bg())
	var wg sync.WaitGroup
	for i, p := range []int{1, 7, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := c.PriorityLock("prio").Lock(wctx, reentrant.Priority(p))
			if err == nil {
				_ = c.PriorityLock("prio").Unlock(h)
			}
		}()
		eventually(t, "a waiter to queue", func() bool { return e.int(t, "ZCARD", priorityQueue) == int64(i+1) })
	}
	info, err := c.Inspect(bg(), "prio")
	require.NoError(t, err)
	assert.Equal(t, reentrant.KindPriority, info.Kind)
	require.Len(t, info.Holders, 1)
	owner, _ := reentrant.OwnerFrom(held)
	assert.Equal(t, owner.String(), info.Holders[0].Owner)
	require.Len(t, info.Queue, 3)
	for i, p := range []int{7, 3, 1} {
		q := info.Queue[i]
		assert.Equal(t, p, q.Priority)
		assert.WithinDuration(t, time.Now(), q.Since, time.Minute)
		assert.True(t, q.Deadline.After(q.Since), "taken for dead only after it arrived")
	}
	cancel()
	waitAll(t, &wg, redistest.Within, func() {})
	require.NoError(t, c.PriorityLock("prio").Unlock(held))
	// A waiter whose attempt was in flight when ctx ended leaves once its
	// reply has come.
	eventually(t, "nothing left", func() bool {
		info, err := c.Inspect(bg(), "prio")
		return err == nil && info.Kind == ""
	})
}

// The acquire hooks carry a priority lock call's priority.
func TestPriorityHooks(t *testing.T) {
	e := onRedis(t)
	var mu sync.Mutex
	var started, ended []int
	c := e.client(t, reentrant.Options{Hooks: reentrant.Hooks{
		AcquireStarted: func(_ context.Context, a reentrant.Acquire) {
			mu.Lock()
			defer mu.Unlock()
			started = append(started, a.Priority)
		},
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) {
			mu.Lock()
			defer mu.Unlock()
			ended = append(ended, a.Priority)
			assert.Equal(t, reentrant.KindPriority, a.Kind)
		},
	}})
	h, err := c.PriorityLock("prio").Lock(bg(), reentrant.Priority(42))
	require.NoError(t, err)
	require.NoError(t, c.PriorityLock("prio").Unlock(h))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{42}, started)
	assert.Equal(t, []int{42}, ended)
}

// A name holding another type is refused with ErrWrongType, and nothing
// is queued.
func TestPriorityWrongType(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	e.do(t, "SET", "prio", "not a lock")
	_, err := c.PriorityLock("prio").Lock(bg(), reentrant.Priority(3))
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	_, _, err = c.PriorityLock("prio").TryLock(bg())
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.Equal(t, int64(0), e.int(t, "EXISTS", priorityQueue, priorityWaiters))
	v, err := e.do(t, "GET", "prio").ToString()
	require.NoError(t, err)
	assert.Equal(t, "not a lock", v)
}

// A live waiter that sleeps a re-poll longer than the watchdog timeout
// keeps its place: its alive window is the longer of the two (three
// re-polls here, 6 s, not the watchdog's 300ms). It queues first, a waiter
// of the same priority queues after its first 300ms have passed, and on
// the release the first is served first.
func TestPriorityAliveWindowCoversRepoll(t *testing.T) {
	e := onRedis(t)
	holder := e.client(t)
	sleepy := e.client(t, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond, RepollInterval: 2 * time.Second})
	other := e.client(t)
	held, err := holder.PriorityLock("prio").Lock(bg())
	require.NoError(t, err)
	served := make(chan string, 2)
	var wg sync.WaitGroup // the waiters' Unlocks, before the clients close
	defer waitAll(t, &wg, 30*time.Second, func() {})
	wait := func(c *reentrant.Client, who string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, err := c.PriorityLock("prio").Lock(bg(), reentrant.Priority(1), reentrant.WaitAtMost(time.Minute))
			if assert.NoError(t, err, who) {
				served <- who
				assert.NoError(t, c.PriorityLock("prio").Unlock(ctx))
			}
		}()
	}
	wait(sleepy, "first")
	eventually(t, "the first waiter to queue", func() bool { return e.int(t, "HLEN", priorityWaiters) == 1 })
	records, err := e.do(t, "HGETALL", priorityWaiters).AsStrMap()
	require.NoError(t, err)
	var first string
	var alive int64
	for owner, r := range records {
		first = owner
		alive, err = strconv.ParseInt(strings.Split(r, ":")[0], 10, 64)
		require.NoError(t, err)
	}
	queued := serverMillis(t, e)
	assert.Greater(t, alive-queued, int64(4000), "alive for three re-polls, not the watchdog's 300ms")
	// Past the watchdog's 300ms, the second waiter arrives.
	eventually(t, "300ms to pass on the server", func() bool { return serverMillis(t, e) > queued+500 })
	wait(other, "second")
	eventually(t, "the second waiter to queue", func() bool {
		owners, err := e.do(t, "ZRANGE", priorityQueue, "0", "-1").AsStrSlice()
		require.NoError(t, err)
		return slices.ContainsFunc(owners, func(o string) bool { return o != first })
	})
	require.NoError(t, holder.PriorityLock("prio").Unlock(held))
	for _, want := range []string{"first", "second"} {
		select {
		case who := <-served:
			assert.Equal(t, want, who, "served in the order they queued")
		case <-time.After(30 * time.Second):
			t.Fatalf("%s not served", want)
		}
	}
}
