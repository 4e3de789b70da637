package scripts_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// priorityLock drives the priority lock's scripts for one name on a real
// server.
type priorityLock struct {
	t        *testing.T
	s        *redistest.Server
	rdb      scripts.Conn
	name     string
	aging    time.Duration
	requests int
	tries    map[string]int
}

func newPriorityLock(t *testing.T, name string, aging time.Duration) *priorityLock {
	s := redistest.Start(t)
	return &priorityLock{t: t, s: s, rdb: scripts.Conn{Client: s.Client()}, name: name, aging: aging, tries: map[string]int{}}
}

// acquire runs one attempt of owner at priority p; join says it waits.
func (l *priorityLock) acquire(owner string, p int, join, grants bool) scripts.Acquired {
	a := scripts.Acquire{Key: l.name, Owner: owner, Lease: 30 * time.Second, Turn: 5 * time.Second, Join: join,
		Publish: scripts.PublishClassic, Priority: p, Aging: l.aging}
	if grants {
		l.tries[owner]++
		a.GrantTry = l.tries[owner]
	}
	r, err := scripts.PriorityAcquire(context.Background(), l.rdb, a)
	require.NoError(l.t, err)
	return r
}

func (l *priorityLock) release(owner string) scripts.Released {
	l.requests++
	r := scripts.Release{Key: l.name, Owner: owner, RequestID: strconv.Itoa(l.requests), Lease: 30 * time.Second,
		LatchTTL: time.Second, Publish: scripts.PublishClassic}
	got, err := scripts.PriorityRelease(context.Background(), l.rdb, r)
	require.NoError(l.t, err)
	return got
}

func (l *priorityLock) queue() []string {
	q, err := l.s.Do("ZRANGE", scripts.PriorityQueue(l.name), "0", "-1").AsStrSlice()
	require.NoError(l.t, err)
	return q
}

func (l *priorityLock) holds(owner string) int64 {
	n, err := l.s.Do("HGET", l.name, owner).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	require.NoError(l.t, err)
	return n
}

func (l *priorityLock) int(cmd ...string) int64 {
	n, err := l.s.Do(cmd...).AsInt64()
	require.NoError(l.t, err)
	return n
}

func (l *priorityLock) record(owner string) string {
	r, err := l.s.Do("HGET", scripts.PriorityWaiters(l.name), owner).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(l.t, err)
	return r
}

// The queue is ordered by place: arrival moved earlier by the priority
// times the aging. A release tells the best-placed waiter only; the lock
// cannot be taken past it, by a waiter or a try-once.
func TestPriorityOrder(t *testing.T) {
	l := newPriorityLock(t, "prio", time.Hour) // an hour a level: strict order within this test
	require.True(t, l.acquire("holder", 0, true, false).OK)
	for _, w := range []struct {
		owner string
		p     int
	}{{"low1", 0}, {"high1", 9}, {"mid1", 5}, {"low2", 0}, {"high2", 9}, {"mid2", 5}} {
		r := l.acquire(w.owner, w.p, true, false)
		require.False(t, r.OK)
		assert.Greater(t, r.PTTL, time.Duration(0), "queued: the holder's PTTL")
	}
	assert.Equal(t, []string{"high1", "high2", "mid1", "mid2", "low1", "low2"}, l.queue(), "by priority, then by arrival")
	assert.Equal(t, scripts.Acquired{PTTL: time.Millisecond}, l.acquire("try", 255, false, false), "a try-once never queues")
	assert.NotContains(t, l.queue(), "try")

	// Places: arrival - p x aging, in microseconds.
	rec := strings.Split(l.record("mid1"), ":")
	require.Len(t, rec, 5)
	assert.Equal(t, "5", rec[1])
	arrival, err := strconv.ParseInt(rec[2], 10, 64)
	require.NoError(t, err)
	score, err := l.s.Do("ZSCORE", scripts.PriorityQueue(l.name), "mid1").AsFloat64()
	require.NoError(t, err)
	assert.Equal(t, float64(arrival-5*time.Hour.Microseconds()), score)

	heard := listen(t, l.rdb.Client, scripts.PriorityChannel(l.name, "high1"))
	assert.Equal(t, scripts.Freed, l.release("holder"))
	assert.Equal(t, pubsub.WakeOne, recv(t, heard), "the head is told on its own channel")
	assert.False(t, l.acquire("mid1", 5, true, false).OK, "free, but high1's turn")
	assert.Equal(t, scripts.Acquired{PTTL: time.Millisecond}, l.acquire("try", 255, false, false), "a try-once does not barge")
	r := l.acquire("mid1", 5, true, false)
	assert.Equal(t, scripts.Acquired{}, r, "still high1's turn: 0, free but another's")
	for _, owner := range []string{"high1", "high2", "mid1", "mid2", "low1", "low2"} {
		require.True(t, l.acquire(owner, 0, true, false).OK, owner)
		require.True(t, l.acquire(owner, 0, true, false).OK, "%s again: reentrant", owner)
		assert.EqualValues(t, 2, l.holds(owner))
		assert.Equal(t, scripts.StillHeld, l.release(owner))
		assert.Equal(t, scripts.Freed, l.release(owner))
	}
	assert.Empty(t, l.queue())
	assert.EqualValues(t, 0, l.int("EXISTS", scripts.PriorityWaiters(l.name)), "no record is left behind")
}

// With an aging of a microsecond a level, priority moves a place by no more
// than 255µs: arrival order wins between waiters that come far enough
// apart.
func TestPriorityAging(t *testing.T) {
	l := newPriorityLock(t, "aging", time.Microsecond)
	require.True(t, l.acquire("holder", 0, true, false).OK)
	require.False(t, l.acquire("early", 0, true, false).OK)
	time.Sleep(time.Millisecond) // arrivals 1ms apart: more than 255 levels of aging
	require.False(t, l.acquire("late", 255, true, false).OK)
	assert.Equal(t, []string{"early", "late"}, l.queue())
}

// A waiter that makes no attempt within its window is taken for dead when
// it reaches the head: the next is served.
func TestPriorityDeadWaiterSkipped(t *testing.T) {
	l := newPriorityLock(t, "dead", time.Second)
	require.True(t, l.acquire("holder", 0, true, false).OK)
	require.False(t, l.acquire("dead", 9, true, false).OK)
	require.False(t, l.acquire("live", 0, true, false).OK)
	// The dead waiter's window ended long ago.
	rec := strings.Split(l.record("dead"), ":")
	rec[0] = "1"
	require.NoError(t, l.s.Do("HSET", scripts.PriorityWaiters(l.name), "dead", strings.Join(rec, ":")).Error())
	heard := listen(t, l.rdb.Client, scripts.PriorityChannel(l.name, "live"))
	assert.Equal(t, scripts.Freed, l.release("holder"))
	assert.Equal(t, pubsub.WakeOne, recv(t, heard))
	assert.Equal(t, []string{"live"}, l.queue())
	assert.Empty(t, l.record("dead"))
	require.True(t, l.acquire("live", 0, true, false).OK)
}

// A release hands the lock to a head that takes grants, and says so by a
// message naming the attempt the grant answers; a head that gives up gives
// it back and the next is served; a waiter that leaves from the head of a
// free lock tells the next at once.
func TestPriorityGrant(t *testing.T) {
	l := newPriorityLock(t, "grant", time.Second)
	ctx := context.Background()
	require.True(t, l.acquire("a", 0, true, true).OK)
	require.False(t, l.acquire("b", 1, true, true).OK)
	require.False(t, l.acquire("c", 0, true, true).OK)
	require.False(t, l.acquire("b", 1, true, true).OK, "an attempt while queued keeps the place")
	assert.Regexp(t, `^\d+:1:\d+:\d+:2$`, l.record("b"))
	assert.Equal(t, []string{"b", "c"}, l.queue())

	heardB := listen(t, l.rdb.Client, scripts.PriorityChannel(l.name, "b"))
	assert.Equal(t, scripts.Freed, l.release("a"))
	assert.Equal(t, pubsub.Granted+":2", recv(t, heardB))
	assert.EqualValues(t, 1, l.holds("b"), "b holds the lock with no attempt of its own")
	assert.Equal(t, "0", l.record("b"))
	pttl := l.int("PTTL", l.name)
	assert.True(t, pttl > 29000 && pttl <= 30000, "the TTL runs to the end of b's last lease: %d ms", pttl)
	require.True(t, l.acquire("b", 1, true, true).OK, "an attempt after a grant takes it")
	assert.EqualValues(t, 1, l.holds("b"), "as one hold")
	assert.Empty(t, l.record("b"))

	heardC := listen(t, l.rdb.Client, scripts.PriorityChannel(l.name, "c"))
	require.False(t, l.acquire("d", 0, true, false).OK)
	assert.Equal(t, scripts.Freed, l.release("b"))
	assert.Equal(t, pubsub.Granted+":1", recv(t, heardC))
	heardD := listen(t, l.rdb.Client, scripts.PriorityChannel(l.name, "d"))
	require.NoError(t, scripts.PriorityLeave(ctx, l.rdb, l.name, "c", 0, scripts.PublishClassic))
	assert.EqualValues(t, 0, l.holds("c"), "a waiter that gives up gives its grant back")
	assert.Empty(t, l.record("c"))
	assert.Equal(t, pubsub.WakeOne, recv(t, heardD), "d takes no grants: it is told")
	require.True(t, l.acquire("d", 0, true, false).OK)

	require.False(t, l.acquire("e", 0, true, false).OK)
	require.False(t, l.acquire("f", 0, true, false).OK)
	assert.Equal(t, scripts.Freed, l.release("d"))
	heardF := listen(t, l.rdb.Client, scripts.PriorityChannel(l.name, "f"))
	require.NoError(t, scripts.PriorityLeave(ctx, l.rdb, l.name, "e", 0, scripts.PublishClassic))
	assert.Equal(t, pubsub.WakeOne, recv(t, heardF), "the head left a free lock: the next is told at once")
	assert.Equal(t, []string{"f"}, l.queue())

	heardJava := listen(t, l.rdb.Client, scripts.LockChannel(l.name))
	require.True(t, l.acquire("f", 0, true, false).OK)
	assert.Equal(t, scripts.Freed, l.release("f"))
	assert.Equal(t, pubsub.WakeOne, recv(t, heardJava), "with nobody queued, a release wakes Java's RLock waiters as RLock's does")
	ok, err := scripts.PriorityForceUnlock(ctx, l.rdb, l.name, scripts.PublishClassic)
	require.NoError(t, err)
	assert.False(t, ok)
}
