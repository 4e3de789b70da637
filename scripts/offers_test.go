package scripts_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// An offer of several owner numbers is given one number per release, in
// turn, with no write of the client's between (the releases' own offers
// are empty, as a client's are once its offer is written); the last used,
// the next release tells the client the lock is free. A late write of the
// offer changes nothing, and a give-back of a later offer releases the
// lock given to any of its numbers.
func TestOffersNumbersGivenInTurn(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	const name = "l"
	grants := "relock_grants:{" + name + "}"
	hold := func(owner string) {
		t.Helper()
		r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: owner, Lease: time.Minute})
		require.NoError(t, err)
		require.True(t, r.OK)
	}
	offer := func(owner string, n, last int64) {
		t.Helper()
		r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: owner, Lease: time.Minute,
			Wake: scripts.Wake{Client: "a", Register: time.Minute, OfferFirst: n, OfferLast: last, Offers: true}})
		require.NoError(t, err)
		require.False(t, r.OK)
	}
	release := func(owner, client string) {
		t.Helper()
		rel := scripts.Release{Key: name, Owner: owner, RequestID: owner, Lease: time.Minute, LatchTTL: time.Minute,
			Publish: scripts.PublishClassic, Directed: true, Handoff: true, Count: true, Believed: true,
			Offer: scripts.Offer{Client: client, Lease: time.Minute, Keep: time.Minute, Listens: time.Minute}}
		got, err := rel.Run(ctx, rdb)
		require.NoError(t, err)
		require.Equal(t, scripts.Freed, got)
	}
	record := func() string {
		rec, err := s.Do("HGET", grants, "a").ToString()
		require.NoError(t, err)
		return rec
	}
	holders := func() map[string]string {
		m, err := s.Do("HGETALL", name).AsStrMap()
		require.NoError(t, err)
		return m
	}

	hold("b:1")
	offer("a:1", 5, 7)
	told := listenAsWaiter(t, s, name, "a")
	by := strings.Split(record(), ":")[1]

	release("b:1", "b")
	for _, step := range []struct{ n, after string }{{"5", "6:" + by + ":7"}, {"6", "7:" + by + ":7"}, {"7", "7:0"}} {
		assert.Equal(t, map[string]string{"a:" + step.n: "1"}, holders(), "handed on in turn")
		assert.Equal(t, pubsub.Granted+":"+step.n, recv(t, told))
		assert.Equal(t, step.after, record(), "moved on with the lease as written, or used up")
		release("a:"+step.n, "a")
	}
	assert.Equal(t, pubsub.WakeOne, recv(t, told), "the offer used up, a is told the lock is free")
	assert.Empty(t, holders())

	hold("b:2")
	offer("a:2", 5, 7)
	assert.Equal(t, "7:0", record(), "a late write of a used offer is refused")
	offer("a:2", 7, 7)
	assert.Equal(t, "7:0", record(), "so is a late write of the very number last given")

	offer("a:3", 8, 10)
	release("b:2", "b")
	assert.Equal(t, map[string]string{"a:8": "1"}, holders())
	assert.Equal(t, pubsub.Granted+":8", recv(t, told))
	released, err := scripts.GiveBack(ctx, rdb, name, "a", 8, 10, scripts.PublishClassic, time.Minute, false)
	require.NoError(t, err)
	assert.True(t, released, "the lock given to the offer's first number is given back")
	assert.Empty(t, holders())
	assert.Equal(t, "10:0", record(), "withdrawn")
}

// An offer written by a relock from before offers held several numbers,
// "<n>:<by>", is given as the one number n, and then marked used up, as
// that relock's own release would have: clients of both can share a lock
// during a rolling upgrade. (That relock reads a newer client's offer,
// "<n>:<by>:<last>", as none, and tells the client the lock is free
// instead, which its waiter then takes.)
func TestOldOfferGivenAsOneNumber(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	const name = "l"
	r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: "b:1", Lease: time.Minute})
	require.NoError(t, err)
	require.True(t, r.OK)
	r, err = scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: "a:1", Lease: time.Minute,
		Wake: scripts.Wake{Client: "a", Register: time.Minute}})
	require.NoError(t, err)
	require.False(t, r.OK, "a registered, without an offer")
	now, err := s.Do("TIME").AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	require.NoError(t, s.Do("HSET", "relock_grants:{"+name+"}", "a", "7:"+strconv.FormatInt((sec+60)*1000, 10)).Error())
	told := listenAsWaiter(t, s, name, "a")
	rel := scripts.Release{Key: name, Owner: "b:1", RequestID: "r", Lease: time.Minute, LatchTTL: time.Minute,
		Publish: scripts.PublishClassic, Directed: true, Handoff: true, Count: true, Believed: true,
		Offer: scripts.Offer{Client: "b", Lease: time.Minute, Keep: time.Minute}}
	got, err := rel.Run(ctx, rdb)
	require.NoError(t, err)
	require.Equal(t, scripts.Freed, got)
	assert.Equal(t, pubsub.Granted+":7", recv(t, told))
	held, err := s.Do("HGETALL", name).AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a:7": "1"}, held)
	rec, err := s.Do("HGET", "relock_grants:{"+name+"}", "a").ToString()
	require.NoError(t, err)
	assert.Equal(t, "7:0", rec, "used up")
}

// listenAsWaiter subscribes for client to lock name's wake channel and to
// its Redisson channel, as a waiting relock client does, and returns what
// the wake channel hears once both subscriptions are live.
func listenAsWaiter(t *testing.T, s *redistest.Server, name, client string) <-chan string {
	t.Helper()
	told := listen(t, s.Client(), scripts.WakeChannel(name, client))
	listen(t, s.Client(), scripts.LockChannel(name))
	redistest.Eventually(t, 10*time.Second, "the subscriptions", func() bool {
		m, err := s.Do("PUBSUB", "NUMSUB", scripts.WakeChannel(name, client), scripts.LockChannel(name)).ToArray()
		require.NoError(t, err)
		w, _ := m[1].AsInt64()
		l, _ := m[3].AsInt64()
		return w == 1 && l == 1
	})
	return told
}
