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

// A relock client that stops waiting still listens on Redisson's channel
// while its subscription lingers. It stays in the waiters' set as a mark
// until then, so a release counts it among the listeners that are not
// Java waiters, and hands the lock on. Without marks the release took it
// for a Java waiter and only woke the next client (30% of the releases of
// a forced handoff with 8 clients). A listener no mark accounts for, or a
// mark that has ended, still stops the handoff.
//
// Client a waits with an offer (owner a:7), c stopped waiting (a pass-on
// that marked it), and b releases, having no waiter left; each listens on
// Redisson's channel on a connection of its own, and a on its wake channel
// too. A release that hands the lock on tells a only: nothing is published
// on Redisson's channel, where the message would wake no one who could
// take the lock.
func TestMarkedListenersLetHandoffsThrough(t *testing.T) {
	for _, tc := range []struct {
		name     string
		markFor  time.Duration // how long c's mark says it listens
		stranger bool          // one more listener, a Java waiter's
		handed   bool
	}{
		{name: "marked", markFor: time.Minute, handed: true},
		{name: "mark-ended", markFor: time.Millisecond},
		{name: "stranger", markFor: time.Minute, stranger: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := redistest.Start(t)
			rdb := scripts.Conn{Client: s.Client()}
			const name = "l"
			waiters := scripts.Waiters(name)

			r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: "b:1", Lease: time.Minute})
			require.NoError(t, err)
			require.True(t, r.OK)
			r, err = scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: "a:1", Lease: time.Minute,
				Wake: scripts.Wake{Client: "a", Register: time.Minute, OfferFirst: 7, Offers: true}})
			require.NoError(t, err)
			require.False(t, r.OK)
			require.NoError(t, scripts.PassOn(ctx, rdb, name, "c", scripts.PublishClassic, tc.markFor))
			if tc.markFor < time.Second { // until the server's clock passes c's mark
				score, err := s.Do("ZSCORE", waiters, "c").AsFloat64()
				require.NoError(t, err)
				redistest.Eventually(t, 10*time.Second, "the end of c's mark", func() bool {
					now, err := s.Do("TIME").AsStrSlice()
					require.NoError(t, err)
					sec, _ := strconv.ParseInt(now[0], 10, 64)
					micros, _ := strconv.ParseInt(now[1], 10, 64)
					return 3e13-score < float64(sec*1000+micros/1000)
				})
			}

			lockChannel := scripts.LockChannel(name)
			subs := s.Client()
			listeners := 3
			told := listen(t, subs, scripts.WakeChannel(name, "a"))
			heard := listen(t, subs, lockChannel) // a's
			listen(t, subs, lockChannel)          // c's
			listen(t, subs, lockChannel)          // b's
			if tc.stranger {
				listen(t, subs, lockChannel)
				listeners++
			}
			numsub := func(channel string) int64 {
				m, err := s.Do("PUBSUB", "NUMSUB", channel).ToArray()
				require.NoError(t, err)
				n, _ := m[1].AsInt64()
				return n
			}
			redistest.Eventually(t, 10*time.Second, "the subscriptions", func() bool {
				return numsub(lockChannel) == int64(listeners) && numsub(scripts.WakeChannel(name, "a")) == 1
			})

			rel := scripts.Release{Key: name, Owner: "b:1", RequestID: "r", Lease: time.Minute, LatchTTL: time.Minute,
				Publish: scripts.PublishClassic, Directed: true, Handoff: true, Count: true, Believed: true,
				Offer: scripts.Offer{Client: "b", Lease: time.Minute, Keep: time.Minute, Listens: time.Minute, Drop: true}}
			got, err := rel.Run(ctx, rdb)
			require.NoError(t, err)
			require.Equal(t, scripts.Freed, got)
			handed, err := s.Do("HEXISTS", name, "a:7").AsBool()
			require.NoError(t, err)
			assert.Equal(t, tc.handed, handed, "the lock handed to a's offer")
			if !tc.handed {
				n, err := s.Do("EXISTS", name).AsInt64()
				require.NoError(t, err)
				assert.Zero(t, n, "not handed: the lock is free")
				assert.Equal(t, pubsub.WakeOne, recv(t, told), "and a was told so")
				assert.Equal(t, pubsub.WakeTold, recv(t, heard), "and the release announced on Redisson's channel")
				return
			}
			assert.Equal(t, pubsub.Granted+":7", recv(t, told))
			// Handed on, it announced nothing on Redisson's channel: the next
			// message there is the test's own.
			require.NoError(t, s.Do("PUBLISH", lockChannel, "next").Error())
			assert.Equal(t, "next", recv(t, heard), "a lock handed on is announced to its taker only")

			// a, with no waiter left, releases in turn: no client is
			// registered now, so the set goes, marks and all, and with it
			// the offers.
			rel = scripts.Release{Key: name, Owner: "a:7", RequestID: "r2", Lease: time.Minute, LatchTTL: time.Minute,
				Publish: scripts.PublishClassic, Directed: true, Handoff: true, Count: true, Believed: true,
				Offer: scripts.Offer{Client: "a", Lease: time.Minute, Keep: time.Minute, Listens: time.Minute, Drop: true}}
			got, err = rel.Run(ctx, rdb)
			require.NoError(t, err)
			require.Equal(t, scripts.Freed, got)
			n, err := s.Do("EXISTS", name, waiters, scripts.FairGrants(name)).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "keys left")
		})
	}
}

// A release that would count the listeners first, by a Redis user refused
// PUBSUB NUMSUB (New could not ask, Redis being down then), publishes
// first instead: it has deleted the lock already, and does not fail.
func TestReleaseCountRefused(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	require.NoError(t, s.Do("ACL", "SETUSER", "nonumsub", "on", ">pw", "~*", "&*", "+@all", "-pubsub|numsub").Error())
	rdb := scripts.Conn{Client: s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "nonumsub", "pw" })}
	const name = "l"
	r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: "b:1", Lease: time.Minute})
	require.NoError(t, err)
	require.True(t, r.OK)
	heard := listen(t, s.Client(), scripts.LockChannel(name))
	rel := scripts.Release{Key: name, Owner: "b:1", RequestID: "r", Lease: time.Minute, LatchTTL: time.Minute,
		Publish: scripts.PublishClassic, Directed: true, Handoff: true, Count: true, Believed: true,
		Offer: scripts.Offer{Client: "b", Lease: time.Minute, Keep: time.Minute, Listens: time.Minute, Drop: true}}
	got, err := rel.Run(ctx, rdb)
	require.NoError(t, err)
	assert.Equal(t, scripts.Freed, got)
	assert.Equal(t, pubsub.WakeTold, recv(t, heard), "announced on Redisson's channel")
}

// A registered client that attempts again keeps its place in the waiters'
// set (ZADD LT): the longest-registered client is served first however
// often it retries. A marked client (one that stopped waiting and still
// listens) that waits again is registered again, not left a mark that no
// release serves.
func TestRegistrationKeepsPlaceAndReplacesMark(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	const name = "l"
	waiters := scripts.Waiters(name)
	r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: "holder:1", Lease: time.Minute})
	require.NoError(t, err)
	require.True(t, r.OK)
	attempt := func(client string) {
		t.Helper()
		r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: name, Owner: client + ":1", Lease: time.Minute,
			Wake: scripts.Wake{Client: client, Register: time.Minute}})
		require.NoError(t, err)
		require.False(t, r.OK)
	}
	order := func() []string {
		t.Helper()
		members, err := s.Do("ZRANGE", waiters, "0", "-1").AsStrSlice()
		require.NoError(t, err)
		return members
	}

	attempt("a")
	attempt("b")
	for range 3 {
		attempt("a")
		assert.Equal(t, []string{"a", "b"}, order(), "a registered first, and stays first when it tries again")
		attempt("b")
	}

	// c stops waiting and is marked while it still listens; then it waits
	// again.
	attempt("c")
	require.NoError(t, scripts.PassOn(ctx, rdb, name, "c", scripts.PublishClassic, time.Minute))
	mark, err := s.Do("ZSCORE", waiters, "c").AsFloat64()
	require.NoError(t, err)
	require.Greater(t, mark, 1e13, "c is a mark")
	attempt("c")
	score, err := s.Do("ZSCORE", waiters, "c").AsFloat64()
	require.NoError(t, err)
	assert.Less(t, score, 1e13, "c waits again: registered, no longer a mark")
	assert.Equal(t, []string{"a", "b", "c"}, order(), "at the end of the set")
}
