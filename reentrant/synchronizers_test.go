package reentrant_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// quiet makes waiters that never re-poll within a test: a wait that ends
// quickly was ended by a message.
var quiet = reentrant.Options{RepollInterval: time.Hour, FairWaitTimeout: time.Hour}

// subscribed waits until channel has n subscribers on the server.
func (e env) subscribed(t *testing.T, channel string, n int64) {
	t.Helper()
	eventually(t, strconv.FormatInt(n, 10)+" subscribers on "+channel, func() bool {
		r, err := e.do(t, "PUBSUB", "NUMSUB", channel).ToArray()
		if err != nil || len(r) != 2 {
			return false
		}
		got, _ := r[1].AsInt64()
		return got >= n
	})
}

// async runs f in a goroutine and returns its error on a channel.
func async(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

func within(t *testing.T, done <-chan error, limit time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err, what)
	case <-time.After(limit):
		t.Fatalf("%s: not done within %v", what, limit)
	}
}

func TestSemaphore(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		s := c.Semaphore("sem")
		set, err := s.TrySetPermits(bg(), 2)
		require.NoError(t, err)
		assert.True(t, set)
		set, err = s.TrySetPermits(bg(), 5)
		require.NoError(t, err)
		assert.False(t, set, "set only once")

		ok, err := s.TryAcquire(bg(), 3)
		require.NoError(t, err)
		assert.False(t, ok, "3 of 2")
		require.NoError(t, s.Acquire(bg(), 2))
		n, err := s.Available(bg())
		require.NoError(t, err)
		assert.Equal(t, int64(0), n)
		ok, err = s.TryAcquire(bg(), 1, reentrant.WaitAtMost(20*time.Millisecond))
		require.NoError(t, err)
		assert.False(t, ok)

		require.NoError(t, s.Release(bg(), 1))
		require.NoError(t, s.AddPermits(bg(), 4))
		drained, err := s.Drain(bg())
		require.NoError(t, err)
		assert.Equal(t, int64(5), drained)
		assert.Equal(t, int64(0), e.int(t, "GET", "sem"))

		assert.ErrorIs(t, s.Acquire(bg(), 1, reentrant.LeaseFor(time.Second)), reentrant.ErrInvalidArgument)
		assert.ErrorIs(t, s.Acquire(bg(), 0), reentrant.ErrInvalidArgument)
		assert.ErrorIs(t, s.Release(bg(), -1), reentrant.ErrInvalidArgument)
	})
}

// ReleaseIfExists gives permits back only to a semaphore whose key exists;
// TrySetPermitsFor sets permits that expire with their key.
func TestSemaphoreIfExistsAndTTL(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		s := c.Semaphore("ttl")
		released, err := s.ReleaseIfExists(bg(), 2)
		require.NoError(t, err)
		assert.False(t, released, "no semaphore yet")
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "ttl"), "nothing created")

		set, err := s.TrySetPermitsFor(bg(), 1, time.Minute)
		require.NoError(t, err)
		assert.True(t, set)
		pttl := e.int(t, "PTTL", "ttl")
		assert.True(t, pttl > 0 && pttl <= 60000, "PTTL %d", pttl)
		set, err = s.TrySetPermitsFor(bg(), 5, time.Minute)
		require.NoError(t, err)
		assert.False(t, set, "set only once")

		released, err = s.ReleaseIfExists(bg(), 2)
		require.NoError(t, err)
		assert.True(t, released)
		n, err := s.Available(bg())
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)

		_, err = s.ReleaseIfExists(bg(), 0)
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = s.TrySetPermitsFor(bg(), 1, 0)
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = s.TrySetPermitsFor(bg(), -1, time.Minute)
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	})
}

// Java's trySetPermits with a time to live and releaseIfExists share the
// semaphore with Go's: each side sees the other's key, its expiry, and
// its release, which wakes the other's waiter.
func TestSemaphoreIfExistsAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, quiet)
	java := redissontest.New(e.rdb(t))
	s := c.Semaphore("ifx")
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()

	released, err := java.SemaphoreReleaseIfExists(bg(), "ifx", 1)
	require.NoError(t, err)
	assert.False(t, released, "Java: no semaphore yet")
	set, err := java.SemaphoreTrySetPermits(bg(), "ifx", 0, time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	set, err = s.TrySetPermitsFor(bg(), 4, time.Minute)
	require.NoError(t, err)
	assert.False(t, set, "Go sees Java's semaphore")
	pttl := e.int(t, "PTTL", "ifx")
	assert.True(t, pttl > 0 && pttl <= 60000, "Java's PX: PTTL %d", pttl)

	waiter := async(func() error { return s.Acquire(ctx, 2) })
	e.subscribed(t, "redisson_sc:{ifx}", 1)
	released, err = java.SemaphoreReleaseIfExists(bg(), "ifx", 2)
	require.NoError(t, err)
	assert.True(t, released)
	within(t, waiter, 10*time.Second, "Go waiter woken by Java's releaseIfExists")

	javaWaiter := async(func() error { return java.SemaphoreAcquire(ctx, "ifx", 1) })
	e.subscribed(t, "redisson_sc:{ifx}", 1)
	released, err = s.ReleaseIfExists(bg(), 1)
	require.NoError(t, err)
	assert.True(t, released)
	within(t, javaWaiter, 10*time.Second, "Java waiter woken by Go's ReleaseIfExists")
}

// Every increase is published as the new total, a decimal integer, and
// never a total of 0 or less: Java's waiters parse it as a count of
// waiters to wake.
func TestSemaphorePublishes(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	s := c.Semaphore("pub")
	msgs := e.subscribe(t, "redisson_sc:{pub}")
	_, err := s.TrySetPermits(bg(), 3)
	require.NoError(t, err)
	assert.Equal(t, "3", receive(t, msgs))
	require.NoError(t, s.AddPermits(bg(), -5))
	require.NoError(t, s.Release(bg(), 1)) // total -1: nothing to announce
	require.NoError(t, s.Release(bg(), 3))
	assert.Equal(t, "2", receive(t, msgs), "the negative totals were not published")
}

// A Go waiter is woken by a Go release and by a Java one; a Java waiter,
// which never re-polls, is woken by a Go release and by AddPermits.
func TestSemaphoreWakesAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, quiet)
	java := redissontest.New(e.rdb(t))
	s := c.Semaphore("wake")
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()

	waiter := async(func() error { return s.Acquire(ctx, 2) })
	e.subscribed(t, "redisson_sc:{wake}", 1)
	require.NoError(t, java.SemaphoreRelease(bg(), "wake", 2))
	within(t, waiter, 10*time.Second, "Go waiter woken by a Java release")

	waiter = async(func() error { return s.Acquire(ctx, 1) })
	e.subscribed(t, "redisson_sc:{wake}", 1)
	require.NoError(t, c.Semaphore("wake").Release(bg(), 1))
	within(t, waiter, 10*time.Second, "Go waiter woken by a Go release")

	javaWaiter := async(func() error { return java.SemaphoreAcquire(ctx, "wake", 1) })
	e.subscribed(t, "redisson_sc:{wake}", 1)
	require.NoError(t, s.Release(bg(), 1))
	within(t, javaWaiter, 10*time.Second, "Java waiter woken by a Go release")

	javaWaiter = async(func() error { return java.SemaphoreAcquire(ctx, "wake", 2) })
	e.subscribed(t, "redisson_sc:{wake}", 1)
	require.NoError(t, s.AddPermits(bg(), 2))
	within(t, javaWaiter, 10*time.Second, "Java waiter woken by AddPermits")

	ok, err := java.SemaphoreTryAcquire(bg(), "wake", 1)
	require.NoError(t, err)
	assert.False(t, ok, "every permit taken")
}

var permitID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestPermitExpirableSemaphore(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	s := c.PermitExpirableSemaphore("pes")
	require.NoError(t, s.SetPermits(bg(), 2))

	p, err := s.Acquire(bg())
	require.NoError(t, err)
	assert.Regexp(t, permitID, p.ID())
	raw, _ := hex.DecodeString(p.ID())
	assert.Equal(t, int64(1), e.int(t, "ZCARD", "{pes}:timeout"))
	score, err := e.do(t, "ZSCORE", "{pes}:timeout", string(raw)).AsFloat64()
	require.NoError(t, err, "the member is the id's 16 raw bytes")
	assert.InDelta(t, float64(time.Now().Add(30*time.Second).UnixMilli()), score, 5000, "kept by the watchdog: a lease of WatchdogTimeout")

	leased, err := s.Acquire(bg(), reentrant.LeaseFor(150*time.Millisecond))
	require.NoError(t, err)
	available, taken, err := s.Permits(bg())
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 2}, [2]int64{available, taken})
	_, ok, err := s.TryAcquire(bg())
	require.NoError(t, err)
	assert.False(t, ok)

	recv(t, leased.Context().Done())
	assert.ErrorIs(t, context.Cause(leased.Context()), reentrant.ErrLeaseEnded)
	assert.NotErrorIs(t, context.Cause(leased.Context()), reentrant.ErrLockLost, "a lease that ran its course is not a loss")
	eventually(t, "the leased permit reclaimed", func() bool {
		available, _, err := s.Permits(bg())
		return err == nil && available == 1
	})
	// A waiter sleeps until the nearest lease ends, with no message.
	short, err := s.Acquire(bg(), reentrant.LeaseFor(100*time.Millisecond))
	require.NoError(t, err)
	q, err := c.PermitExpirableSemaphore("pes").Acquire(bg(), reentrant.WaitAtMost(10*time.Second))
	require.NoError(t, err, "taken when the nearest lease ended")
	assert.ErrorIs(t, short.Release(bg()), reentrant.ErrLeaseEnded, "its lease ended; reclaimed already")
	assert.ErrorIs(t, c.PermitExpirableSemaphore("pes").Release(bg(), short.ID()), reentrant.ErrNotHeld, "by id, Redis says")

	require.NoError(t, p.Release(bg()))
	assert.ErrorIs(t, context.Cause(p.Context()), context.Canceled)
	assert.ErrorIs(t, p.Release(bg()), reentrant.ErrNotHeld)
	assert.ErrorIs(t, s.Release(bg(), "nothex"), reentrant.ErrInvalidArgument)
	require.NoError(t, s.UpdateLease(bg(), q.ID(), 100*time.Millisecond))
	recv(t, q.Context().Done())
	assert.ErrorIs(t, context.Cause(q.Context()), reentrant.ErrLeaseEnded, "no longer kept by the watchdog")
	assert.ErrorIs(t, s.UpdateLease(bg(), "00000000000000000000000000000000", time.Second), reentrant.ErrNotHeld)
}

// The watchdog keeps a permit taken without a lease, and cancels its
// context with ErrLockLost when the permit is gone.
func TestPermitWatchdog(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond})
	s := c.PermitExpirableSemaphore("kept")
	_, err := s.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	p, err := s.Acquire(bg())
	require.NoError(t, err)
	raw, _ := hex.DecodeString(p.ID())
	first, err := e.do(t, "ZSCORE", "{kept}:timeout", string(raw)).AsFloat64()
	require.NoError(t, err)
	eventually(t, "three renewals", func() bool {
		score, err := e.do(t, "ZSCORE", "{kept}:timeout", string(raw)).AsFloat64()
		return err == nil && score > first+600
	})
	require.NoError(t, p.Context().Err(), "held past three lease lengths")
	assert.Equal(t, int64(1), e.int(t, "ZREM", "{kept}:timeout", string(raw)))
	select {
	case <-p.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a removed permit's context is not cancelled")
	}
	assert.ErrorIs(t, context.Cause(p.Context()), reentrant.ErrLockLost)
	assert.ErrorIs(t, context.Cause(p.Context()), reentrant.ErrNotRenewed)
}

// Go and Java permits share the semaphore: each sees the other's, a
// release on either side wakes a waiter on the other, and a Java permit
// whose lease ended is reclaimed by Go.
func TestPermitsAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, quiet)
	java := redissontest.New(e.rdb(t))
	s := c.PermitExpirableSemaphore("mixed")
	_, err := s.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()

	id, _, err := java.PermitTryAcquire(bg(), "mixed", time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	var goPermit *reentrant.Permit
	waiter := async(func() (err error) { goPermit, err = s.Acquire(ctx); return err })
	e.subscribed(t, "redisson_sc:{mixed}", 1)
	released, err := java.PermitRelease(bg(), "mixed", id)
	require.NoError(t, err)
	assert.True(t, released)
	within(t, waiter, 10*time.Second, "Go waiter woken by a Java release")

	var javaID string
	javaWaiter := async(func() (err error) { javaID, err = java.PermitAcquire(ctx, "mixed", 0); return err })
	e.subscribed(t, "redisson_sc:{mixed}", 1)
	require.NoError(t, goPermit.Release(bg()))
	within(t, javaWaiter, 10*time.Second, "Java waiter woken by a Go release")
	assert.Regexp(t, permitID, javaID)
	require.NoError(t, s.Release(bg(), javaID), "a Java permit released by id from Go")

	id, _, err = java.PermitTryAcquire(bg(), "mixed", 50*time.Millisecond)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	p, err := s.Acquire(ctx)
	require.NoError(t, err, "taken once the Java lease ended")
	n, err := java.PermitAvailable(bg(), "mixed")
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	require.NoError(t, p.Release(bg()))
	n, err = java.PermitAvailable(bg(), "mixed")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}

func TestCountDownLatch(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, quiet)
	java := redissontest.New(e.rdb(t))
	l := c.CountDownLatch("gate")
	require.NoError(t, l.Await(bg()), "a missing latch is open")
	set, err := l.TrySetCount(bg(), 2)
	require.NoError(t, err)
	assert.True(t, set)
	set, err = java.LatchTrySetCount(bg(), "gate", 5)
	require.NoError(t, err)
	assert.False(t, set)
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()

	goWaiter := async(func() error { return l.Await(ctx) })
	javaWaiter := async(func() error { return java.LatchAwait(ctx, "gate") })
	e.subscribed(t, "redisson_countdownlatch__channel__{gate}", 2)
	assert.ErrorIs(t, l.Await(bg(), reentrant.WaitAtMost(20*time.Millisecond)), reentrant.ErrNotAcquired)
	require.NoError(t, java.LatchCountDown(bg(), "gate"))
	n, err := l.Count(bg())
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	require.NoError(t, l.CountDown(bg()))
	within(t, goWaiter, 10*time.Second, "Go waiter")
	within(t, javaWaiter, 10*time.Second, "Java waiter")
	assert.Equal(t, int64(0), e.int(t, "EXISTS", "gate"), "deleted at 0")

	_, err = l.TrySetCount(bg(), 3)
	require.NoError(t, err)
	goWaiter = async(func() error { return l.Await(ctx) })
	javaWaiter = async(func() error { return java.LatchAwait(ctx, "gate") })
	e.subscribed(t, "redisson_countdownlatch__channel__{gate}", 2)
	for range 3 {
		require.NoError(t, java.LatchCountDown(bg(), "gate"))
	}
	within(t, goWaiter, 10*time.Second, "Go waiter opened by Java count-downs")
	within(t, javaWaiter, 10*time.Second, "Java waiter")
	deleted, err := l.Delete(bg())
	require.NoError(t, err)
	assert.False(t, deleted)
	assert.ErrorIs(t, c.CountDownLatch("").CountDown(bg()), reentrant.ErrInvalidArgument)
}

func TestRateLimiter(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	r := c.RateLimiter("rl")
	_, err := r.TryAcquire(bg(), 1)
	assert.ErrorIs(t, err, reentrant.ErrRateNotSet)
	rate := reentrant.Rate{Permits: 3, Interval: 300 * time.Millisecond}
	set, err := r.TrySetRate(bg(), rate)
	require.NoError(t, err)
	assert.True(t, set)
	set, err = r.TrySetRate(bg(), reentrant.Rate{Permits: 9, Interval: time.Second})
	require.NoError(t, err)
	assert.False(t, set)
	_, err = r.TryAcquire(bg(), 4)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, "more than the rate")

	start := time.Now()
	for range 3 {
		ok, err := r.TryAcquire(bg(), 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	ok, err := r.TryAcquire(bg(), 1)
	require.NoError(t, err)
	assert.False(t, ok, "the window is full")
	n, err := r.Available(bg())
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	require.NoError(t, r.Acquire(bg(), 2))
	assert.GreaterOrEqual(t, time.Since(start), 290*time.Millisecond, "not before the window moved")

	// PER_CLIENT: each client its own window.
	require.NoError(t, c.RateLimiter("pc").SetRate(bg(), reentrant.Rate{Permits: 1, Interval: time.Minute, PerClient: true}))
	other := e.client(t)
	for _, cl := range []*reentrant.Client{c, other} {
		ok, err := cl.RateLimiter("pc").TryAcquire(bg(), 1)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = cl.RateLimiter("pc").TryAcquire(bg(), 1)
		require.NoError(t, err)
		assert.False(t, ok)
	}
	assert.ErrorIs(t, r.SetRate(bg(), reentrant.Rate{Permits: 1}), reentrant.ErrInvalidArgument)
}

// Release gives permits back, up to the rate; Config reads what was set.
func TestRateLimiterReleaseAndConfig(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		r := c.RateLimiter("rr")
		_, err := r.Config(bg())
		assert.ErrorIs(t, err, reentrant.ErrRateNotSet)
		assert.ErrorIs(t, r.Release(bg(), 1), reentrant.ErrRateNotSet)

		rate := reentrant.Rate{Permits: 3, Interval: time.Hour, KeepAlive: 2 * time.Hour}
		require.NoError(t, r.SetRate(bg(), rate))
		got, err := r.Config(bg())
		require.NoError(t, err)
		assert.Equal(t, rate, got)

		ok, err := r.TryAcquire(bg(), 3)
		require.NoError(t, err)
		require.True(t, ok)
		available := func() int64 {
			t.Helper()
			n, err := r.Available(bg())
			require.NoError(t, err)
			return n
		}
		assert.Equal(t, int64(0), available())
		require.NoError(t, r.Release(bg(), 2))
		assert.Equal(t, int64(2), available())
		require.NoError(t, r.Release(bg(), 5))
		assert.Equal(t, int64(3), available(), "no more than the rate")
		assert.ErrorIs(t, r.Release(bg(), 0), reentrant.ErrInvalidArgument)

		perClient := reentrant.Rate{Permits: 1, Interval: time.Minute, PerClient: true}
		require.NoError(t, c.RateLimiter("pc").SetRate(bg(), perClient))
		got, err = e.client(t).RateLimiter("pc").Config(bg())
		require.NoError(t, err)
		assert.Equal(t, perClient, got, "another client reads it")
	})
}

// Java's release and getConfig on a limiter Go uses, and Go's on one Java
// set.
func TestRateLimiterReleaseAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	java := redissontest.New(e.rdb(t))
	set, err := java.RateTrySetRate(bg(), "jr", false, 3, time.Hour, 0)
	require.NoError(t, err)
	require.True(t, set)
	r := c.RateLimiter("jr")
	got, err := r.Config(bg())
	require.NoError(t, err)
	assert.Equal(t, reentrant.Rate{Permits: 3, Interval: time.Hour}, got, "Java's configuration")

	ok, err := r.TryAcquire(bg(), 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, java.RateRelease(bg(), "jr", 1))
	n, err := r.Available(bg())
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "Java gave one back")
	require.NoError(t, r.Release(bg(), 1))
	wait, err := java.RateTryAcquire(bg(), "jr", 2)
	require.NoError(t, err)
	assert.Equal(t, int64(0), wait, "Java takes the two Go and Java gave back")

	require.NoError(t, c.RateLimiter("gr").SetRate(bg(), reentrant.Rate{Permits: 7, Interval: time.Minute, PerClient: true}))
	perClient, rate, interval, err := java.RateConfig(bg(), "gr")
	require.NoError(t, err)
	assert.Equal(t, []any{true, int64(7), time.Minute}, []any{perClient, rate, interval}, "Go's configuration, read by Java")
}

// UpdateRate changes a configured limiter and keeps what its window took.
func TestRateLimiterUpdateRate(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		r := c.RateLimiter("ur")
		available := func() int64 {
			t.Helper()
			n, err := r.Available(bg())
			require.NoError(t, err)
			return n
		}
		updated, err := r.UpdateRate(bg(), reentrant.Rate{Permits: 5, Interval: time.Hour})
		require.NoError(t, err)
		assert.False(t, updated, "not configured")
		assert.Zero(t, e.int(t, "EXISTS", "ur"))

		require.NoError(t, r.SetRate(bg(), reentrant.Rate{Permits: 10, Interval: time.Hour}))
		ok, err := r.TryAcquire(bg(), 4)
		require.NoError(t, err)
		require.True(t, ok)
		updated, err = r.UpdateRate(bg(), reentrant.Rate{Permits: 5, Interval: time.Hour})
		require.NoError(t, err)
		assert.True(t, updated)
		assert.Equal(t, int64(1), available(), "5 less the 4 taken")
		_, err = r.UpdateRate(bg(), reentrant.Rate{Permits: 2, Interval: time.Hour})
		require.NoError(t, err)
		assert.Equal(t, int64(0), available(), "never below 0")
		got, err := r.Config(bg())
		require.NoError(t, err)
		assert.Equal(t, reentrant.Rate{Permits: 2, Interval: time.Hour}, got)

		_, err = r.UpdateRate(bg(), reentrant.Rate{Permits: 2, Interval: time.Hour, PerClient: true})
		require.NoError(t, err)
		assert.Equal(t, int64(2), available(), "a change of type empties the windows")
		_, err = r.UpdateRate(bg(), reentrant.Rate{Permits: 0, Interval: time.Hour})
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	})
}

// Java's updateRate keeps the window Go took from, and Go's the one Java
// took from.
func TestRateLimiterUpdateAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	java := redissontest.New(e.rdb(t))

	g := c.RateLimiter("gu")
	require.NoError(t, g.SetRate(bg(), reentrant.Rate{Permits: 10, Interval: time.Hour}))
	ok, err := g.TryAcquire(bg(), 3)
	require.NoError(t, err)
	require.True(t, ok)
	updated, err := java.RateUpdate(bg(), "gu", false, 4, time.Hour, 0)
	require.NoError(t, err)
	require.True(t, updated)
	n, err := g.Available(bg())
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "Java's 4 less Go's 3")

	set, err := java.RateTrySetRate(bg(), "ju", false, 10, time.Hour, 0)
	require.NoError(t, err)
	require.True(t, set)
	wait, err := java.RateTryAcquire(bg(), "ju", 6)
	require.NoError(t, err)
	require.Zero(t, wait)
	updated, err = c.RateLimiter("ju").UpdateRate(bg(), reentrant.Rate{Permits: 8, Interval: time.Hour})
	require.NoError(t, err)
	require.True(t, updated)
	wait, err = java.RateTryAcquire(bg(), "ju", 3)
	require.NoError(t, err)
	assert.Positive(t, wait, "Go's 8 less Java's 6 leaves 2")
	wait, err = java.RateTryAcquire(bg(), "ju", 2)
	require.NoError(t, err)
	assert.Zero(t, wait)
}

// Go and Java share one OVERALL window.
func TestRateLimiterAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	java := redissontest.New(e.rdb(t))
	set, err := java.RateTrySetRate(bg(), "shared", false, 3, time.Minute, 0)
	require.NoError(t, err)
	require.True(t, set)
	ok, err := c.RateLimiter("shared").TryAcquire(bg(), 2)
	require.NoError(t, err)
	assert.True(t, ok)
	// Go's window member is Redisson's struct.pack('Bc0I', 16, id, permits).
	members, err := e.do(t, "ZRANGE", "{shared}:permits", "0", "-1").AsStrSlice()
	require.NoError(t, err)
	require.Len(t, members, 1)
	unpacked, err := e.do(t, "EVAL", "local id, permits = struct.unpack('Bc0I', ARGV[1]) return {#id, permits, struct.pack('Bc0I', #id, id, permits) == ARGV[1] and 1 or 0}", "0", members[0]).AsIntSlice()
	require.NoError(t, err)
	assert.Equal(t, []int64{16, 2, 1}, unpacked)
	wait, err := java.RateTryAcquire(bg(), "shared", 1)
	require.NoError(t, err)
	assert.Zero(t, wait, "the third permit")
	wait, err = java.RateTryAcquire(bg(), "shared", 1)
	require.NoError(t, err)
	assert.Greater(t, wait, int64(50_000), "full for about a minute")
	ok, err = c.RateLimiter("shared").TryAcquire(bg(), 1)
	require.NoError(t, err)
	assert.False(t, ok)
	n, err := c.RateLimiter("shared").Available(bg())
	require.NoError(t, err)
	assert.Zero(t, n)
}

// The synchronizers answer "could not reach Redis" with the connection
// error, never ErrNotAcquired; nil handles and a zero Client give
// ErrInvalidArgument, not a panic.
func TestSynchronizersOutageAndNil(t *testing.T) {
	s := onRedis(t)
	c := s.client(t, reentrant.Options{RepollInterval: 50 * time.Millisecond})
	s.server.Kill()
	refused := func(err error) {
		t.Helper()
		require.Error(t, err)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, io.EOF), "%v", err)
		assert.NotErrorIs(t, err, reentrant.ErrNotAcquired)
	}
	_, err := c.Semaphore("s").TryAcquire(bg(), 1, reentrant.WaitAtMost(200*time.Millisecond))
	refused(err)
	_, _, err = c.PermitExpirableSemaphore("p").TryAcquire(bg(), reentrant.WaitAtMost(200*time.Millisecond))
	refused(err)
	refused(c.CountDownLatch("l").Await(bg(), reentrant.WaitAtMost(200*time.Millisecond)))
	_, err = c.RateLimiter("r").TryAcquire(bg(), 1, reentrant.WaitAtMost(200*time.Millisecond))
	refused(err)

	var zero reentrant.Client
	var nilSem *reentrant.Semaphore
	var nilPermit *reentrant.Permit
	assert.ErrorIs(t, nilSem.Release(bg(), 1), reentrant.ErrInvalidArgument)
	assert.ErrorIs(t, nilPermit.Release(bg()), reentrant.ErrInvalidArgument)
	assert.ErrorIs(t, zero.Semaphore("x").Acquire(bg(), 1), reentrant.ErrInvalidArgument)
	assert.ErrorIs(t, zero.CountDownLatch("x").Await(bg()), reentrant.ErrInvalidArgument)
	_, err = zero.RateLimiter("x").Available(bg())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	_, err = zero.PermitExpirableSemaphore("x").Acquire(nil) //nolint:staticcheck // a nil ctx is the point
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	var nilLatch *reentrant.CountDownLatch
	var nilRate *reentrant.RateLimiter
	for _, o := range []expirable{nilSem, nilLatch, nilRate, zero.PermitExpirableSemaphore("x")} {
		_, err = o.Delete(bg())
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = o.Expire(bg(), time.Second)
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = o.ClearExpire(bg())
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = o.Exists(bg())
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	}
	_, err = c.Semaphore("s").Exists(bg())
	refused(err)
	_, err = c.RateLimiter("r").Delete(bg())
	refused(err)
	_, err = c.CountDownLatch("l").Expire(bg(), time.Second)
	refused(err)
	_, err = c.RateLimiter("r").Config(bg())
	refused(err)
	refused(c.RateLimiter("r").Release(bg(), 1))
	_, err = nilRate.Config(bg())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	assert.ErrorIs(t, nilRate.Release(bg(), 1), reentrant.ErrInvalidArgument)
}

// Bad input gets an errors.Is-able error and leaves Redis as it was.
func TestSynchronizersBadInput(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	e.do(t, "HSET", "h", "f", "v")
	e.do(t, "SET", "str", "x")
	wrong := func(err error, what string) {
		t.Helper()
		assert.ErrorIs(t, err, reentrant.ErrWrongType, what)
	}
	wrong(c.Semaphore("h").Acquire(bg(), 1), "semaphore on a hash")
	wrong(c.Semaphore("h").Release(bg(), 1), "semaphore release on a hash")
	_, _, err := c.PermitExpirableSemaphore("h").TryAcquire(bg())
	wrong(err, "permit on a hash")
	wrong(c.CountDownLatch("h").CountDown(bg()), "latch on a hash")
	wrong(c.CountDownLatch("h").Await(bg()), "latch await on a hash")
	_, err = c.RateLimiter("str").TryAcquire(bg(), 1)
	wrong(err, "rate limiter on a string")
	assert.Equal(t, "v", mustString(t, e, "HGET", "h", "f"))
	assert.Equal(t, "x", mustString(t, e, "GET", "str"))

	invalid := func(err error, what string) {
		t.Helper()
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, what)
	}
	s := c.Semaphore("s")
	_, err = s.TrySetPermits(bg(), -1)
	invalid(err, "negative permits")
	invalid(s.Acquire(bg(), -2), "negative acquire")
	p := c.PermitExpirableSemaphore("p")
	invalid(p.SetPermits(bg(), -1), "negative size")
	invalid(p.UpdateLease(bg(), "00000000000000000000000000000000", 0), "zero lease")
	invalid(p.Release(bg()), "no ids")
	_, err = c.CountDownLatch("l").TrySetCount(bg(), 0)
	invalid(err, "zero count")
	r := c.RateLimiter("r")
	_, err = r.TrySetRate(bg(), reentrant.Rate{Permits: 0, Interval: time.Second})
	invalid(err, "zero rate")
	_, err = r.TrySetRate(bg(), reentrant.Rate{Permits: 1, Interval: time.Second, KeepAlive: time.Millisecond})
	invalid(err, "keep-alive below the interval")
	_, err = r.TryAcquire(bg(), 0)
	invalid(err, "zero permits")
	keys, err := e.do(t, "KEYS", "*").AsStrSlice()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"h", "str"}, keys, "nothing written")
}

func mustString(t *testing.T, e env, args ...string) string {
	t.Helper()
	s, err := e.do(t, args...).ToString()
	require.NoError(t, err)
	return s
}

// A permit acquire whose reply is lost after the script ran is undone by
// id: the wait goes on and ends holding exactly one permit, and a TryAcquire
// that does not wait gives the permit back before it reports the error.
func TestPermitLostReply(t *testing.T) {
	s := redistest.Start(t)
	c, armed := loseRepliesClient(t, s)
	sem := c.PermitExpirableSemaphore("lost-permit")
	_, err := sem.TrySetPermits(bg(), 2)
	require.NoError(t, err)

	armed.Store(1)
	p, err := sem.Acquire(bg())
	require.NoError(t, err, "the wait goes on after the lost reply")
	assert.Zero(t, armed.Load(), "a reply was lost")
	taken, err := s.Do("ZCARD", "{lost-permit}:timeout").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), taken, "one permit taken, not two")

	armed.Store(1)
	_, ok, err := sem.TryAcquire(bg())
	assert.False(t, ok)
	require.Error(t, err, "TryAcquire does not wait: it reports the lost reply")
	available, taken, err := sem.Permits(bg())
	require.NoError(t, err)
	assert.Equal(t, [2]int64{1, 1}, [2]int64{available, taken}, "the lost attempt's permit was given back")
	require.NoError(t, p.Release(bg()))

	// Two at once: the lost attempt's two come back together.
	armed.Store(1)
	ps, err := sem.AcquireN(bg(), 2)
	require.NoError(t, err, "the wait goes on after the lost reply")
	assert.Zero(t, armed.Load(), "a reply was lost")
	available, taken, err = sem.Permits(bg())
	require.NoError(t, err)
	assert.Equal(t, [2]int64{0, 2}, [2]int64{available, taken}, "two permits taken, not four")
	require.NoError(t, sem.Release(bg(), ps[0].ID(), ps[1].ID()))
}

// A count-down or a release whose reply was lost is not sent again: the
// script may have run, and a second run would open a latch one count early
// or give one permit too many. The caller gets the error; Redis counted once.
func TestSynchronizerLostReplyNotResent(t *testing.T) {
	s := redistest.Start(t)
	c, armed := loseRepliesClient(t, s)

	latch := c.CountDownLatch("lost-down")
	_, err := latch.TrySetCount(bg(), 3)
	require.NoError(t, err)
	armed.Store(1)
	assert.Error(t, latch.CountDown(bg()), "the lost reply is reported")
	assert.Zero(t, armed.Load(), "a reply was lost")
	assert.Equal(t, int64(2), mustInt(t, s, "GET", "lost-down"), "counted down once")

	sem := c.Semaphore("lost-release")
	_, err = sem.TrySetPermits(bg(), 0)
	require.NoError(t, err)
	armed.Store(1)
	assert.Error(t, sem.Release(bg(), 1), "the lost reply is reported")
	assert.Zero(t, armed.Load(), "a reply was lost")
	assert.Equal(t, int64(1), mustInt(t, s, "GET", "lost-release"), "one permit given")
}

// Waiters on one client share one subscription, and one message tells them
// all what happened: a latch that opens wakes every Await on the client, a
// release of n permits (or n permits added) wakes up to n Acquires. The
// waiters never re-poll here (quiet), so a waiter not woken waits out the
// test's bound.
func TestLocalWaitersAllWoken(t *testing.T) {
	e := onRedis(t)
	c, other := e.client(t, quiet), e.client(t, quiet)
	// waiting starts n calls and returns once each has made its attempts
	// before sleeping (one, then one after subscribing), each of which runs
	// command perAttempt times (a script call, once the scripts are loaded,
	// for the latch; the calls of the others may go to Redis coalesced).
	waiting := func(n int, command string, perAttempt int64, call func() error) []<-chan error {
		calls := func() int64 { return e.server.CommandStats()[command].Calls }
		before := calls()
		var done []<-chan error
		for range n {
			done = append(done, async(call))
		}
		eventually(t, "every waiter's attempts", func() bool { return calls() >= before+perAttempt*int64(2*n) })
		return done
	}
	allWithin := func(done []<-chan error, what string) {
		for i, d := range done {
			within(t, d, 10*time.Second, fmt.Sprintf("%s %d", what, i))
		}
	}
	ctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()

	latch := c.CountDownLatch("local-latch")
	_, err := latch.TrySetCount(bg(), 1)
	require.NoError(t, err)
	_, err = latch.Count(bg()) // loads the script Await runs
	require.NoError(t, err)
	done := waiting(3, "evalsha", 1, func() error { return latch.Await(ctx) })
	require.NoError(t, other.CountDownLatch("local-latch").CountDown(bg()))
	allWithin(done, "latch Await")

	sem := c.Semaphore("local-sem")
	_, err = sem.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	require.NoError(t, sem.Acquire(bg(), 1))                                 // loads the script; none left
	done = waiting(3, "get", 2, func() error { return sem.Acquire(ctx, 1) }) // the count's check, then the count
	require.NoError(t, other.Semaphore("local-sem").Release(bg(), 3))
	allWithin(done, "semaphore Acquire")

	permits := c.PermitExpirableSemaphore("local-permits")
	_, err = permits.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	_, err = permits.Acquire(bg()) // loads the script; none left
	require.NoError(t, err)
	done = waiting(3, "zrangebyscore", 1, func() error { _, err := permits.Acquire(ctx); return err }) // expired leases reclaimed
	require.NoError(t, other.PermitExpirableSemaphore("local-permits").AddPermits(bg(), 3))
	allWithin(done, "permit Acquire")
}

// A count-down on an open latch changes nothing: the count does not go
// below zero, nobody is told anything, and a new count can be set.
func TestCountDownOnOpenLatch(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	l := c.CountDownLatch("open")
	_, err := l.TrySetCount(bg(), 1)
	require.NoError(t, err)
	require.NoError(t, l.CountDown(bg()))
	msgs := e.subscribe(t, "redisson_countdownlatch__channel__{open}")
	require.NoError(t, l.CountDown(bg()), "on the open latch")
	n, err := l.Count(bg())
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, e.int(t, "EXISTS", "open"))
	set, err := l.TrySetCount(bg(), 2)
	require.NoError(t, err)
	assert.True(t, set, "a new count")
	assert.Equal(t, "1", receive(t, msgs), "the new count's message is the first")
}

// A rate limiter admits at most its rate per interval to pollers, and a
// waiter on a full window sleeps until the window frees a permit, as the
// limiter's reply says, instead of asking again every millisecond.
func TestRateLimiterWindow(t *testing.T) {
	e := onRedis(t)
	var attempts atomic.Int64
	c := e.client(t, reentrant.Options{Hooks: reentrant.Hooks{
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) { attempts.Store(int64(a.Attempts)) },
	}})
	const interval = 600 * time.Millisecond
	r := c.RateLimiter("window")
	_, err := r.TrySetRate(bg(), reentrant.Rate{Permits: 3, Interval: interval})
	require.NoError(t, err)

	// Poll one interval, less a margin for the clocks: three admissions.
	admitted := 0
	for start := time.Now(); time.Since(start) < interval-100*time.Millisecond; {
		ok, err := r.TryAcquire(bg(), 1)
		require.NoError(t, err)
		if ok {
			admitted++
		}
	}
	assert.Equal(t, 3, admitted, "admissions in one interval")

	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Acquire(ctx, 1), "the window frees a permit")
	t.Logf("%d attempts", attempts.Load())
	assert.LessOrEqual(t, attempts.Load(), int64(3), "slept until the window had a permit")
}
