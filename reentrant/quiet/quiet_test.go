package quiet_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/quiet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, s *redistest.Server, opts reentrant.Options) *reentrant.Client {
	t.Helper()
	c, err := reentrant.New(s.Client(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// locker takes and releases a lock; the quiet lock and the plain one.
type locker interface {
	Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error)
	Unlock(held context.Context) error
}

// lateWrites runs rounds in which a holder's lease runs out without a
// release and its write lands up to late after (a holder paused past its
// lease), while the next holder waits for the lock; it returns how many of
// those writes landed after the next holder had the lock (on a store that
// cannot check tokens, each is a write from two holders), and the
// shortest time from a hold's end to the next holder's start.
func lateWrites(t *testing.T, l locker, rounds int, late time.Duration) (landed int, shortest time.Duration) {
	shortest = time.Hour
	for range rounds {
		first, err := l.Lock(context.Background(), reentrant.LeaseFor(200*time.Millisecond))
		require.NoError(t, err)
		wrote := make(chan time.Time, 1)
		ended := make(chan time.Time, 1)
		go func() {
			<-first.Done()
			ended <- time.Now()
			time.Sleep(rand.N(late))
			wrote <- time.Now()
		}()
		next, err := l.Lock(context.Background())
		require.NoError(t, err)
		began := time.Now()
		shortest = min(shortest, began.Sub(redistest.Recv(t, ended)))
		if redistest.Recv(t, wrote).After(began) {
			landed++
		}
		require.NoError(t, l.Unlock(next))
	}
	return landed, shortest
}

// The quiet period's promise, on a store that cannot check tokens: with
// holds that end unreleased and writes that land up to 300 ms after, a
// quiet period of 400 ms lets no late write land after the next holder
// began (and the next holder begins 400 ms or more after the hold ended);
// the plain lock, taken at once, lets them land.
func TestQuietPeriodStopsLateWrites(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, s, reentrant.Options{})
	const late, delay = 300 * time.Millisecond, 400 * time.Millisecond
	landed, shortest := lateWrites(t, quiet.New(c, "quiet", delay), 6, late)
	assert.Zero(t, landed, "late writes after the next holder began, with a quiet period")
	assert.GreaterOrEqual(t, shortest, delay, "the next holder began a quiet period after the hold ended")
	assert.Less(t, shortest, delay+2*time.Second, "and not much later")
	t.Logf("quiet: %d late writes landed; the next holder began %v after a hold ended, at the soonest", landed, shortest)

	landed, shortest = lateWrites(t, c.Lock("plain"), 6, late)
	assert.Positive(t, landed, "without one, late writes land after the next holder began")
	t.Logf("plain: %d of 6 late writes landed; the next holder began %v after a hold ended, at the soonest", landed, shortest)
}

// A release leaves no quiet period: the next holder has the lock at once
// (well under the 5 s period) and no marker is left. A waiter during a
// quiet period sleeps on a timer: a handful of script calls, not a poll.
func TestReleaseIsNotQuiet(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, s, reentrant.Options{})
	q := quiet.New(c, "released", 5*time.Second)
	held, err := q.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, q.Unlock(held))
	began := time.Now()
	again, err := q.Lock(context.Background())
	require.NoError(t, err)
	assert.Less(t, time.Since(began), time.Second, "taken at once after a release")
	require.NoError(t, q.Unlock(again))
	n, err := s.Do("EXISTS", "relock_quiet:{released}").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no marker after a release")

	q = quiet.New(c, "expired", 700*time.Millisecond)
	first, err := q.Lock(context.Background(), reentrant.LeaseFor(100*time.Millisecond))
	require.NoError(t, err)
	<-first.Done()
	calls := s.ScriptCalls()
	next, err := q.Lock(context.Background())
	require.NoError(t, err)
	// The server counts every script, the client's own background ones
	// included: 11 to 15 were seen on Valkey with four copies of the test
	// at once. A poll would run one every few milliseconds, 70 and more.
	assert.LessOrEqual(t, s.ScriptCalls()-calls, int64(25), "a few attempts and marks over 700 ms, not a poll")
	require.NoError(t, q.Unlock(next))
}

// A hold the watchdog keeps keeps its marker a quiet period past the
// lock's TTL (renew.lua renews it with the lock); when the lock is lost
// under it (deleted here, as a force unlock or an eviction would), the
// marker stays, and the next quiet holder begins a quiet period later.
func TestWatchdogKeepsTheMarker(t *testing.T) {
	s := redistest.Start(t)
	const ttl, delay = 300 * time.Millisecond, 600 * time.Millisecond
	c := client(t, s, reentrant.Options{WatchdogTimeout: ttl})
	q := quiet.New(c, "kept", delay)
	held, err := q.Lock(context.Background())
	require.NoError(t, err)
	marker := func() int64 { n, _ := s.Do("PTTL", "relock_quiet:{kept}").AsInt64(); return n }
	before := s.ScriptCalls()
	// Nine renewals, 100 ms apart: past the marker's first TTL (the lock's
	// 300 ms and the quiet period's 600).
	redistest.Eventually(t, 10*time.Second, "nine renewals", func() bool {
		return s.ScriptCalls() >= before+9
	})
	require.NoError(t, context.Cause(held))
	assert.Greater(t, marker(), delay.Milliseconds(), "the marker outlives the lock by the quiet period")

	require.NoError(t, s.Do("DEL", "kept").Error())
	<-held.Done()
	lost := time.Now()
	next, err := quiet.New(client(t, s, reentrant.Options{WatchdogTimeout: ttl}), "kept", delay).Lock(context.Background())
	require.NoError(t, err)
	assert.Greater(t, time.Since(lost), delay-ttl, "the next holder waited the quiet period out")
	assert.ErrorIs(t, q.Unlock(held), reentrant.ErrLockLost)
	_ = next
}

// A Java Redisson client does not know the marker: after a hold ends
// unreleased with no quiet holder waiting, it takes the lock at once.
func TestJavaIgnoresTheQuietPeriod(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, s, reentrant.Options{})
	q := quiet.New(c, "shared", time.Minute)
	held, err := q.Lock(context.Background(), reentrant.LeaseFor(100*time.Millisecond))
	require.NoError(t, err)
	<-held.Done()
	redistest.Eventually(t, 10*time.Second, "the hold to expire", func() bool {
		n, _ := s.Do("EXISTS", "shared").AsInt64()
		return n == 0
	})
	java := redissontest.New(s.Client())
	pttl, err := java.TryAcquire(context.Background(), "shared", 1)
	require.NoError(t, err)
	assert.Zero(t, pttl, "the Java client has the lock during the quiet period")
	_, ok, err := q.TryLock(context.Background())
	require.NoError(t, err)
	assert.False(t, ok)
}

// Bad input is refused with ErrInvalidArgument, a marker of another type
// with ErrWrongType, and the lock is given back: nothing is held after.
func TestQuietBadInput(t *testing.T) {
	s := redistest.Start(t)
	c := client(t, s, reentrant.Options{})
	ctx := context.Background()
	_, err := quiet.New(nil, "x", time.Second).Lock(ctx)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	_, err = quiet.New(c, "x", 0).Lock(ctx)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	var nilCtx context.Context
	_, err = quiet.New(c, "x", time.Second).Lock(nilCtx)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	assert.ErrorIs(t, quiet.New(c, "x", time.Second).Unlock(nilCtx), reentrant.ErrInvalidArgument)

	require.NoError(t, s.Do("HSET", "relock_quiet:{typed}", "a", "b").Error())
	_, err = quiet.New(c, "typed", time.Second).Lock(ctx)
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	n, err := s.Do("EXISTS", "typed").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the lock was given back")
}
