package reentrant_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// A holder whose goroutine deadlocks while it holds (it waits for a mutex
// that it holds itself) lets the lock go: within its progress deadline plus
// a round trip, another client's waiting Lock gets it, and not before the
// deadline. The stalled holder's context ends with ErrStalled (not
// ErrLockLost), and so does its Unlock.
func TestStalledHolderLetsGo(t *testing.T) {
	e := onRedis(t)
	const within = 300 * time.Millisecond
	var lost []error
	var mu sync.Mutex
	a := e.client(t, reentrant.Options{OnLockLost: func(_ string, _ reentrant.Owner, cause error) {
		mu.Lock()
		defer mu.Unlock()
		lost = append(lost, cause)
	}})
	b := e.client(t)

	held := make(chan context.Context, 1)
	var job sync.Mutex
	job.Lock()
	t.Cleanup(job.Unlock) // the deadlocked goroutine ends with the test
	taken := make(chan time.Time, 1)
	go func() {
		ctx, err := a.Lock("stalled-job").Lock(bg(), reentrant.ProgressWithin(within))
		if !assert.NoError(t, err) {
			close(held)
			return
		}
		taken <- time.Now()
		held <- ctx
		reentrant.Progress(ctx)
		job.Lock() // a deadlock: job is locked already, and nothing here unlocks it
		job.Unlock()
	}()
	ctx, ok := <-held
	require.True(t, ok)
	start := <-taken

	got, err := b.Lock("stalled-job").Lock(bg(), reentrant.WaitAtMost(within+3*time.Second))
	require.NoError(t, err, "the stalled hold was not given back")
	after := time.Since(start)
	assert.GreaterOrEqual(t, after, within-10*time.Millisecond, "the lock was given back before its deadline")
	assert.Less(t, after, within+time.Second, "the lock was free later than its deadline and a round trip")
	require.NoError(t, b.Lock("stalled-job").Unlock(got))

	<-ctx.Done()
	assert.ErrorIs(t, context.Cause(ctx), reentrant.ErrStalled)
	assert.NotErrorIs(t, context.Cause(ctx), reentrant.ErrLockLost, "its own silence, not Redis")
	assert.ErrorIs(t, a.Lock("stalled-job").Unlock(ctx), reentrant.ErrStalled)
	assert.False(t, reentrant.Progress(ctx), "a stalled hold takes no more reports")
	mu.Lock()
	assert.Empty(t, lost, "a stall is not a loss")
	mu.Unlock()
}

// A job that reports progress every second keeps its lock through an hour
// (of fake time), re-entries included, and a report sends no command;
// once it stops, the hold and its re-entry end with
// ErrStalled when the deadline passes, the HoldEnded hook says so for
// each, and the lock is given back in full.
func TestProgressKeepsTheHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var ended []error
		m, c, _ := fakeTimeClient(t, reentrant.Options{Hooks: reentrant.Hooks{
			HoldEnded: func(_ context.Context, e reentrant.HoldEnd) {
				mu.Lock()
				defer mu.Unlock()
				ended = append(ended, e.Cause)
			},
		}})
		const within = 5 * time.Second
		lk := c.Lock("long-job")
		held, err := lk.Lock(bg(), reentrant.ProgressWithin(within))
		require.NoError(t, err)
		inner, err := lk.Lock(held, reentrant.ProgressWithin(time.Hour))
		require.NoError(t, err, "a re-entry")
		assert.Equal(t, 2, holdCount(t, m, "long-job"))

		commands := m.CommandCount()
		for range 1000 {
			reentrant.Progress(held)
		}
		assert.Equal(t, commands, m.CommandCount(), "a report sends nothing")
		for range 3600 {
			time.Sleep(time.Second)
			require.True(t, reentrant.Progress(inner), "a report through the re-entry's context")
		}
		require.NoError(t, held.Err(), "an hour of reports keeps the hold")
		require.NoError(t, inner.Err())

		last := time.Now()
		<-held.Done()
		assert.Equal(t, within, time.Since(last), "the re-entry shares the outer hold's deadline")
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrStalled)
		assert.ErrorIs(t, context.Cause(inner), reentrant.ErrStalled)
		synctest.Wait()
		assert.False(t, m.Exists("long-job"), "both acquisitions given back")
		mu.Lock()
		assert.Len(t, ended, 2)
		for _, cause := range ended {
			assert.ErrorIs(t, cause, reentrant.ErrStalled)
		}
		mu.Unlock()
		assert.ErrorIs(t, lk.Unlock(inner), reentrant.ErrStalled)

		plain, err := c.Lock("no-deadline").Lock(bg())
		require.NoError(t, err)
		assert.False(t, reentrant.Progress(plain), "a hold without a progress deadline")
		assert.False(t, reentrant.Progress(bg()), "no hold at all")
		assert.False(t, reentrant.Progress(nil), "a nil ctx") //nolint:staticcheck // a nil ctx on purpose
		time.Sleep(time.Minute)
		require.NoError(t, plain.Err())
		require.NoError(t, c.Lock("no-deadline").Unlock(plain))

		_, err = c.Lock("bad").Lock(bg(), reentrant.ProgressWithin(time.Microsecond))
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		_, err = c.Lock("bad").Lock(bg(), reentrant.ProgressWithin(time.Second), reentrant.ProgressWithin(time.Minute))
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, "two deadlines: refused, as two waits are")
		assert.ErrorContains(t, err, "twice")
		assert.False(t, m.Exists("bad"), "nothing written")
	})
}

// holdCount is the hold count of the lock's only owner.
func holdCount(t *testing.T, m *miniredis.Miniredis, key string) int {
	t.Helper()
	fields, err := m.HKeys(key)
	require.NoError(t, err)
	require.Len(t, fields, 1)
	n, err := strconv.Atoi(m.HGet(key, fields[0]))
	require.NoError(t, err)
	return n
}

// ProgressWithin is for a Lock's hold: what cannot keep a progress
// deadline refuses it, and changes nothing.
func TestProgressWithinRefused(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	p := reentrant.ProgressWithin(time.Second)
	_, err := reentrant.NewMultiLock(c.Lock("a"), c.Lock("b")).Lock(bg(), p)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, "a multi-lock")
	_, err = c.PermitExpirableSemaphore("permits").Acquire(bg(), p)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, "a permit")
	assert.ErrorIs(t, c.Semaphore("sem").Acquire(bg(), 1, p), reentrant.ErrInvalidArgument, "a semaphore")
	assert.ErrorIs(t, c.CountDownLatch("latch").Await(bg(), p), reentrant.ErrInvalidArgument, "a latch")
	assert.ErrorIs(t, c.RateLimiter("rate").Acquire(bg(), 1, p), reentrant.ErrInvalidArgument, "a rate limiter")
	assert.Equal(t, int64(0), e.int(t, "EXISTS", "a", "b", "permits", "sem", "latch", "rate"), "nothing written")
}

// A stall tells the work first, then gives the hold back: each of its
// three acquisitions' held contexts has ended before any of them is
// released, and HoldEnded reports each as its release ends, newest first,
// with the release's own time and outcome, the hash counting one
// acquisition fewer each time.
func TestStallTellsTheWorkFirst(t *testing.T) {
	e := onRedis(t)
	type end struct {
		e         reentrant.HoldEnd
		told      bool  // every held context had ended when it was reported
		remaining int64 // the hold count in Redis when it was reported
	}
	ends := make(chan end, 3)
	var helds []context.Context
	var mu sync.Mutex
	c := e.client(t, reentrant.Options{Hooks: reentrant.Hooks{HoldEnded: func(_ context.Context, he reentrant.HoldEnd) {
		mu.Lock()
		told := true
		for _, h := range helds {
			told = told && h.Err() != nil
		}
		mu.Unlock()
		n, _ := e.do(t, "HGETALL", "stall-order").AsIntMap()
		var count int64
		for _, v := range n {
			count += v
		}
		ends <- end{he, told, count}
	}}})
	lk := c.Lock("stall-order")
	held, err := lk.Lock(bg(), reentrant.ProgressWithin(100*time.Millisecond))
	require.NoError(t, err)
	second, err := lk.Lock(held)
	require.NoError(t, err)
	third, err := lk.Lock(second)
	require.NoError(t, err)
	mu.Lock()
	helds = []context.Context{held, second, third}
	mu.Unlock()

	for want := int64(2); want >= 0; want-- {
		got := recv(t, ends)
		assert.True(t, got.told, "the work is told before the give-back")
		assert.Equal(t, want, got.remaining, "reported after its own release")
		assert.ErrorIs(t, got.e.Cause, reentrant.ErrStalled)
		assert.NoError(t, got.e.Err, "each release succeeded")
		assert.Positive(t, got.e.Releasing, "the release's own time")
	}
	assert.Equal(t, int64(0), e.int(t, "EXISTS", "stall-order"))
}

// A progress deadline counts from the last report, not from the check
// that found it: a hold reported once at 3 s of a 5 s deadline stalls at
// 8 s exactly, not at 10 s (a check that re-armed for a whole deadline),
// and not never (one that found the report and forgot to re-arm).
func TestProgressDeadlineCountsFromTheLastReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c, _ := fakeTimeClient(t, reentrant.Options{})
		const within = 5 * time.Second
		held, err := c.Lock("once").Lock(bg(), reentrant.ProgressWithin(within))
		require.NoError(t, err)
		time.Sleep(3 * time.Second)
		require.True(t, reentrant.Progress(held))
		last := time.Now()
		select {
		case <-held.Done():
			assert.Equal(t, within, time.Since(last), "stalled a deadline after the last report")
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrStalled)
		case <-time.After(3 * within):
			t.Fatal("a hold reported once, then silent, never stalled")
		}
	})
}

// ProgressDue sets when the next report is due, for that report only: a
// long step keeps the hold past the deadline, a short one brings the stall
// forward, and the reports after it are due within ProgressWithin again;
// a due of 0 stalls the hold at once.
func TestProgressDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c, _ := fakeTimeClient(t, reentrant.Options{})
		const within = 5 * time.Second
		stalledAfter := func(held context.Context) time.Duration {
			t.Helper()
			from := time.Now()
			select {
			case <-held.Done():
				require.ErrorIs(t, context.Cause(held), reentrant.ErrStalled)
				return time.Since(from)
			case <-time.After(2 * time.Hour):
				t.Fatal("never stalled")
				return 0
			}
		}

		long, err := c.Lock("long-step").Lock(bg(), reentrant.ProgressWithin(within))
		require.NoError(t, err)
		require.True(t, reentrant.ProgressDue(long, time.Hour))
		time.Sleep(30 * time.Minute)
		require.NoError(t, long.Err(), "the long step's report keeps the hold past the deadline")
		require.True(t, reentrant.Progress(long))
		assert.Equal(t, within, stalledAfter(long), "the next report is due within ProgressWithin again")

		short, err := c.Lock("short-step").Lock(bg(), reentrant.ProgressWithin(within))
		require.NoError(t, err)
		require.True(t, reentrant.ProgressDue(short, time.Second))
		assert.Equal(t, time.Second, stalledAfter(short), "a short due brings the stall forward")

		now, err := c.Lock("give-up").Lock(bg(), reentrant.ProgressWithin(within))
		require.NoError(t, err)
		require.True(t, reentrant.ProgressDue(now, 0))
		assert.Zero(t, stalledAfter(now), "a due of 0 stalls at once")
		assert.False(t, reentrant.ProgressDue(now, time.Second), "a stalled hold takes no more reports")
		assert.False(t, reentrant.ProgressDue(bg(), time.Second), "no hold")
		assert.False(t, reentrant.ProgressDue(nil, time.Second), "a nil ctx") //nolint:staticcheck // a nil ctx on purpose
	})
}
