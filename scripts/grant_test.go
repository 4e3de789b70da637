package scripts_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// listen subscribes channel on a connection of its own and returns the
// messages that come on it.
func listen(t *testing.T, rdb rueidis.Client, channel string) <-chan string {
	t.Helper()
	d, cancel := rdb.Dedicate()
	t.Cleanup(cancel)
	got := make(chan string, 16)
	d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { got <- m.Message }})
	require.NoError(t, d.Do(context.Background(), d.B().Subscribe().Channel(channel).Build()).Error())
	return got
}

// A release hands the fair lock to the head of the queue when the head
// takes grants: the head is the holder without an attempt, and is told so
// on its channel, by a message that names the attempt the grant answers.
// The lock's TTL runs to the end of the lease the head's last attempt
// asked for, not to the end of its turn.
// A head that is not listening takes the grant with its next attempt. One
// that takes no grants, or whose last attempt is older than its lease, is
// woken as Redisson's are; one that gives up gives the grant back, and the
// lock goes on.
func TestFairGrant(t *testing.T) {
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	ctx := context.Background()
	const name = "grant"
	requests := 0
	tries := map[string]int{}
	acquire := func(owner string, grants bool) scripts.Acquired {
		a := scripts.Acquire{Key: name, Owner: owner, Lease: 30 * time.Second, Turn: 5 * time.Second, Join: true, Publish: scripts.PublishClassic}
		if grants {
			tries[owner]++
			a.GrantTry = tries[owner]
		}
		r, err := scripts.FairAcquire(ctx, rdb, a)
		require.NoError(t, err)
		return r
	}
	release := func(owner string) {
		requests++
		r := scripts.Release{Key: name, Owner: owner, RequestID: strconv.Itoa(requests), Lease: 30 * time.Second,
			LatchTTL: time.Second, Publish: scripts.PublishClassic}
		got, err := scripts.FairRelease(ctx, rdb, r)
		require.NoError(t, err)
		require.Equal(t, scripts.Freed, got)
	}
	queue := func() []string {
		q, err := s.Do("LRANGE", scripts.FairQueue(name), "0", "-1").AsStrSlice()
		require.NoError(t, err)
		return q
	}
	holds := func(owner string) int64 {
		n, err := s.Do("HGET", name, owner).AsInt64()
		if rueidis.IsRedisNil(err) {
			return 0
		}
		require.NoError(t, err)
		return n
	}
	grant := func(owner string) string {
		g, err := s.Do("HGET", scripts.FairGrants(name), owner).ToString()
		if rueidis.IsRedisNil(err) {
			return ""
		}
		require.NoError(t, err)
		return g
	}

	require.True(t, acquire("a", true).OK, "a free lock is taken as ever")
	require.False(t, acquire("b", true).OK)
	require.False(t, acquire("c", true).OK)
	require.False(t, acquire("d", false).OK)
	assert.Equal(t, []string{"b", "c", "d"}, queue())
	require.False(t, acquire("b", true).OK, "an attempt while queued")
	assert.Regexp(t, `^\d+:30000:5000:2$`, grant("b"), "a waiter that takes grants is recorded with its lease, its turn and its last attempt")
	assert.Empty(t, grant("d"), "one that does not is not")

	heardB := listen(t, rdb.Client, scripts.FairChannel(name, "b"))
	release("a")
	assert.Equal(t, pubsub.Granted+":2", recv(t, heardB), "the message names the attempt the grant answers")
	assert.EqualValues(t, 1, holds("b"), "the head holds the lock with no attempt of its own")
	assert.Equal(t, []string{"c", "d"}, queue())
	assert.Equal(t, "0", grant("b"))
	pttl, err := s.Do("PTTL", name).AsInt64()
	require.NoError(t, err)
	assert.True(t, pttl > 29000 && pttl <= 30000, "the end of the 30s lease b's last attempt asked for, not of its turn (after a's 30s and its own 5s): %d ms", pttl)

	require.True(t, acquire("b", true).OK, "an attempt after a grant takes it")
	assert.EqualValues(t, 1, holds("b"), "as one hold, not a second")
	assert.Empty(t, grant("b"))

	release("b") // c is not listening: it is given the lock all the same
	assert.EqualValues(t, 1, holds("c"))
	assert.Equal(t, []string{"d"}, queue())
	require.True(t, acquire("c", true).OK, "c takes the grant with its next attempt")
	assert.EqualValues(t, 1, holds("c"))
	require.False(t, acquire("e", true).OK)
	assert.Equal(t, []string{"d", "e"}, queue())

	heardD := listen(t, rdb.Client, scripts.FairChannel(name, "d"))
	release("c") // d takes no grants: told as Redisson's waiters are
	assert.Equal(t, pubsub.WakeOne, recv(t, heardD))
	assert.EqualValues(t, 0, holds("d"))
	require.True(t, acquire("d", false).OK)

	heardE := listen(t, rdb.Client, scripts.FairChannel(name, "e"))
	require.False(t, acquire("f", false).OK)
	release("d")
	assert.Equal(t, pubsub.Granted+":1", recv(t, heardE))
	assert.EqualValues(t, 1, holds("e"))
	heardF := listen(t, rdb.Client, scripts.FairChannel(name, "f"))
	require.NoError(t, scripts.FairLeave(ctx, rdb, name, "e", 5*time.Second, scripts.PublishClassic))
	assert.EqualValues(t, 0, holds("e"), "a waiter that gives up gives its grant back")
	assert.Empty(t, grant("e"))
	assert.Equal(t, pubsub.WakeOne, recv(t, heardF), "and the lock goes on to the next head")
	require.True(t, acquire("f", false).OK)

	// A head whose last attempt is older than its lease may be gone: it is
	// woken, not given the lock.
	require.False(t, acquire("g", true).OK)
	require.NoError(t, s.Do("HSET", scripts.FairGrants(name), "g", "1:30000:5000:1").Error())
	heardG := listen(t, rdb.Client, scripts.FairChannel(name, "g"))
	release("f")
	assert.Equal(t, pubsub.WakeOne, recv(t, heardG))
	assert.EqualValues(t, 0, holds("g"))
}
