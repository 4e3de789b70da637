package scripts_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/scripts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNames(t *testing.T) {
	assert.Equal(t, "redisson_lock__channel:{order:42}", scripts.LockChannel("order:42"))
	assert.Equal(t, "redisson_lock__channel:user:{7}:cart", scripts.LockChannel("user:{7}:cart"))
	assert.Equal(t, "redisson_unlock_latch:{n}:req", scripts.UnlockLatch("n", "req"))
	assert.Equal(t, "{n}:rwlock_timeout", scripts.Suffixed("n", "rwlock_timeout"))
	assert.Equal(t, "a{b}:x", scripts.Suffixed("a{b}", "x"))
}

func TestSlot(t *testing.T) {
	// Known values from the Redis Cluster specification and CLUSTER KEYSLOT.
	assert.Equal(t, uint16(12739), scripts.Slot("123456789"))
	assert.Equal(t, uint16(12182), scripts.Slot("foo"))
	assert.Equal(t, scripts.Slot("user1000"), scripts.Slot("{user1000}.following"))
	assert.Equal(t, scripts.Slot("{}x"), scripts.Slot("{}x"), "empty tag: whole key")
	assert.NotEqual(t, scripts.Slot("x"), scripts.Slot("{}x"))
	// Every derived name lands in its lock's slot, unless SlotSafe says not.
	for _, n := range []string{"order:42", "user:{7}:cart", "{a}", "x{}y", "x{y", "x}{y}"} {
		same := scripts.Slot(n) == scripts.Slot(scripts.LockChannel(n)) &&
			scripts.Slot(n) == scripts.Slot(scripts.UnlockLatch(n, "r")) &&
			scripts.Slot(n) == scripts.Slot(scripts.Suffixed(n, "s"))
		assert.Equal(t, scripts.SlotSafe(n), same, n)
	}
	assert.False(t, scripts.SlotSafe("x{}y"))
	assert.False(t, scripts.SlotSafe("x{y"))
}

// TestSlotMatchesRedis compares with a real server's CLUSTER KEYSLOT.
func TestSlotMatchesRedis(t *testing.T) {
	s := redistest.Start(t, "--cluster-enabled", "yes")
	for _, k := range []string{"order:42", "user:{7}:cart", "{}x", "a{b", "ü{ñ}", ""} {
		n, err := s.Do("CLUSTER", "KEYSLOT", k).AsInt64()
		require.NoError(t, err)
		assert.Equal(t, uint16(n), scripts.Slot(k), k)
	}
}

func each(t *testing.T, f func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult)) {
	t.Run("redis", func(t *testing.T) {
		s := redistest.Start(t)
		f(t, scripts.Conn{Client: s.Client()}, s.Do)
	})
	t.Run("miniredis", func(t *testing.T) {
		_, c := redistest.Miniredis(t)
		f(t, scripts.Conn{Client: c}, func(a ...string) rueidis.RedisResult {
			return c.Do(context.Background(), c.B().Arbitrary(a...).Build())
		})
	})
}

// A retried release with the same request id returns its first reply and
// releases nothing more, for every kind of lock.
func TestReleaseLatch(t *testing.T) {
	ctx := context.Background()
	take := scripts.Acquire{Key: "l", Owner: "o:1", Lease: time.Minute, Turn: time.Minute, Join: true, Publish: scripts.PublishClassic}
	type kind struct {
		name    string
		field   string
		acquire func(rdb scripts.Conn) (scripts.Acquired, error)
		release func(rdb scripts.Conn, r scripts.Release) (scripts.Released, error)
	}
	kinds := []kind{
		{"lock", "o:1",
			func(rdb scripts.Conn) (scripts.Acquired, error) {
				return scripts.LockAcquire(ctx, rdb, take)
			},
			func(rdb scripts.Conn, r scripts.Release) (scripts.Released, error) { return r.Run(ctx, rdb) }},
		{"read", "o:1",
			func(rdb scripts.Conn) (scripts.Acquired, error) {
				return scripts.ReadAcquire(ctx, rdb, take)
			},
			func(rdb scripts.Conn, r scripts.Release) (scripts.Released, error) {
				return scripts.ReadRelease(ctx, rdb, r)
			}},
		{"write", "o:1:write",
			func(rdb scripts.Conn) (scripts.Acquired, error) {
				return scripts.WriteAcquire(ctx, rdb, take)
			},
			func(rdb scripts.Conn, r scripts.Release) (scripts.Released, error) {
				return scripts.WriteRelease(ctx, rdb, r)
			}},
		{"fair", "o:1",
			func(rdb scripts.Conn) (scripts.Acquired, error) {
				return scripts.FairAcquire(ctx, rdb, take)
			},
			func(rdb scripts.Conn, r scripts.Release) (scripts.Released, error) {
				return scripts.FairRelease(ctx, rdb, r)
			}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
				for i := 0; i < 2; i++ {
					r, err := k.acquire(rdb)
					require.NoError(t, err)
					require.True(t, r.OK)
				}
				rel := scripts.Release{Key: "l", Owner: "o:1", RequestID: "r1", Lease: time.Minute, LatchTTL: time.Minute, Publish: scripts.PublishClassic}
				for retry := 0; retry < 3; retry++ {
					rel.Again = retry > 0 // a retry reads the latch
					got, err := k.release(rdb, rel)
					require.NoError(t, err)
					assert.Equal(t, scripts.StillHeld, got)
				}
				n, err := do("HGET", "l", k.field).AsInt64()
				require.NoError(t, err)
				assert.Equal(t, int64(1), n, "three tries, one release")
				rel.RequestID, rel.Again = "r2", false
				got, err := k.release(rdb, rel)
				require.NoError(t, err)
				assert.Equal(t, scripts.Freed, got)
				rel.Again = true
				got, err = k.release(rdb, rel)
				require.NoError(t, err)
				assert.Equal(t, scripts.Freed, got, "answered from the latch")
				ttl, err := do("PTTL", scripts.UnlockLatch("l", "r2")).AsInt64()
				require.NoError(t, err)
				assert.Greater(t, ttl, int64(0), "the latch expires")
				rel.RequestID, rel.Again = "r3", false
				got, err = k.release(rdb, rel)
				require.NoError(t, err)
				assert.Equal(t, scripts.NotHeld, got)
			})
		})
	}
}

// A believed release that frees the lock writes no latch, and its retry,
// finding no hold, answers NotHeld (it cannot tell that from a hold lost); one that gives back an inner hold still
// writes its latch, which answers its retry. So for the plain lock and the
// fair lock.
func TestBelievedRelease(t *testing.T) {
	ctx := context.Background()
	for _, k := range []struct {
		name    string
		acquire func(context.Context, scripts.Conn, scripts.Acquire) (scripts.Acquired, error)
		release func(context.Context, scripts.Conn, scripts.Release) (scripts.Released, error)
	}{
		{"plain", scripts.LockAcquire, func(ctx context.Context, c scripts.Conn, r scripts.Release) (scripts.Released, error) {
			return r.Run(ctx, c)
		}},
		{"fair", scripts.FairAcquire, scripts.FairRelease},
	} {
		t.Run(k.name, func(t *testing.T) { believedRelease(t, ctx, k.acquire, k.release) })
	}
}

func believedRelease(t *testing.T, ctx context.Context, acquire func(context.Context, scripts.Conn, scripts.Acquire) (scripts.Acquired, error),
	release func(context.Context, scripts.Conn, scripts.Release) (scripts.Released, error)) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		take := scripts.Acquire{Key: "l", Owner: "o:1", Lease: time.Minute}
		for i := 0; i < 2; i++ {
			r, err := acquire(ctx, rdb, take)
			require.NoError(t, err)
			require.True(t, r.OK)
		}
		rel := scripts.Release{Key: "l", Owner: "o:1", RequestID: "inner", Lease: time.Minute, LatchTTL: time.Minute, Publish: scripts.PublishClassic, Believed: true}
		for retry := 0; retry < 2; retry++ {
			rel.Again = retry > 0
			got, err := release(ctx, rdb, rel)
			require.NoError(t, err)
			assert.Equal(t, scripts.StillHeld, got)
			assert.True(t, rel.Latched(got))
		}
		rel.RequestID, rel.Again = "last", false
		got, err := release(ctx, rdb, rel)
		require.NoError(t, err)
		assert.Equal(t, scripts.Freed, got)
		assert.False(t, rel.Latched(got))
		n, err := do("EXISTS", scripts.UnlockLatch("l", "last")).AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "no latch for a believed release that freed the lock")
		rel.Again = true
		got, err = release(ctx, rdb, rel)
		require.NoError(t, err)
		assert.Equal(t, scripts.NotHeld, got, "the retry finds no hold, which its first send may have freed or data loss taken")
		rel.RequestID, rel.Again = "first", false
		got, err = release(ctx, rdb, rel)
		require.NoError(t, err)
		assert.Equal(t, scripts.NotHeld, got, "a first send that finds no hold says so")
	})
}

// Renewal extends only the named owner's existing hold, and reports the
// rest, without touching them.
func TestRenewOnlyOwnHolds(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		for _, k := range []string{"mine", "theirs"} {
			owner := map[string]string{"mine": "o:1", "theirs": "o:2"}[k]
			_, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: k, Owner: owner, Lease: time.Second})
			require.NoError(t, err)
		}
		do("SET", "string", "v")
		renewed, errs := scripts.Renew(ctx, rdb, time.Hour, [][]scripts.Held{
			{{Key: "mine", Owner: "o:1"}, {Key: "theirs", Owner: "o:1"}},
			{{Key: "gone", Owner: "o:1"}, {Key: "string", Owner: "o:1"}},
		})
		require.Equal(t, []error{nil, nil}, errs)
		assert.Equal(t, [][]bool{{true, false}, {false, false}}, renewed)
		mine, _ := do("PTTL", "mine").AsInt64()
		theirs, _ := do("PTTL", "theirs").AsInt64()
		assert.Greater(t, mine, int64(3000000))
		assert.LessOrEqual(t, theirs, int64(1000))
		gone, _ := do("EXISTS", "gone").AsInt64()
		assert.Zero(t, gone, "never re-created")
		ttl, _ := do("PTTL", "string").AsInt64()
		assert.Equal(t, int64(-1), ttl)
	})
}

// A failed acquire returns the holder's PTTL; a key without expiry gives -1.
func TestAcquireReturnsPTTL(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		_, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "l", Owner: "o:1", Lease: 5 * time.Second})
		require.NoError(t, err)
		r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "l", Owner: "o:2", Lease: time.Minute})
		require.NoError(t, err)
		assert.False(t, r.OK)
		assert.InDelta(t, 5*time.Second, r.PTTL, float64(time.Second))
		do("PERSIST", "l")
		r, err = scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "l", Owner: "o:2", Lease: time.Minute})
		require.NoError(t, err)
		assert.Equal(t, -time.Millisecond, r.PTTL)
	})
}

// The rate limiter's errors carry relock's codes on every server, not a
// Lua error text the server may reword.
func TestRateErrorCodes(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		_, _, err := scripts.RateAcquire(ctx, rdb, "rl", "client", 1)
		assert.Equal(t, scripts.CodeRateNotSet, scripts.Code(err), "%v", err)
		_, err = scripts.RateAvailable(ctx, rdb, "rl", "client")
		assert.Equal(t, scripts.CodeRateNotSet, scripts.Code(err), "%v", err)
		_, err = scripts.RateSet(ctx, rdb, "rl", "client", scripts.Rate{Permits: 2, Interval: time.Second}, true)
		require.NoError(t, err)
		_, _, err = scripts.RateAcquire(ctx, rdb, "rl", "client", 3)
		assert.Equal(t, scripts.CodeRateExceeded, scripts.Code(err), "%v", err)
		acquired, _, err := scripts.RateAcquire(ctx, rdb, "rl", "client", 2)
		require.NoError(t, err)
		assert.True(t, acquired)
		assert.Empty(t, scripts.Code(do("GET", "rl").Error()), "a reply that is not an error has no code")
		assert.Empty(t, scripts.Code(do("HINCRBY", "rl", "rate", "x").Error()), "a server error has no relock code")
	})
}

// A directed release tells the registered client only when someone heard
// its message on Redisson's channel: a relock client that waits for a
// directed wake listens there too, so nobody there means nobody to tell,
// and the release costs no look at the waiters' set. Here the registered
// client is made up, so telling it drops it from the set (nobody hears its
// wake channel): the set shows whether the release looked.
func TestDirectedReleaseTellsOnlyWhenHeard(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	waiters := scripts.Waiters("l")
	release := func() {
		r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "l", Owner: "o:1", Lease: time.Minute})
		require.NoError(t, err)
		require.True(t, r.OK)
		rel := scripts.Release{Key: "l", Owner: "o:1", RequestID: "r", Lease: time.Minute, LatchTTL: time.Minute,
			Publish: scripts.PublishClassic, Directed: true, Believed: true}
		got, err := rel.Run(ctx, rdb)
		require.NoError(t, err)
		require.Equal(t, scripts.Freed, got)
	}
	require.NoError(t, s.Do("ZADD", waiters, "1", "gone-client").Error())

	release()
	n, err := s.Do("ZCARD", waiters).AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "nobody on Redisson's channel: the set is not looked at")

	sub := s.Client()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- sub.Receive(subCtx, sub.B().Subscribe().Channel(scripts.LockChannel("l")).Build(), func(rueidis.PubSubMessage) {})
	}()
	redistest.Eventually(t, 10*time.Second, "the subscription", func() bool {
		m, err := s.Do("PUBSUB", "NUMSUB", scripts.LockChannel("l")).ToArray()
		if err != nil || len(m) != 2 {
			return false
		}
		k, _ := m[1].AsInt64()
		return k == 1
	})
	release()
	n, err = s.Do("ZCARD", waiters).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "someone listening: the client registered longest is told (and, unheard, dropped)")
	cancel()
	recv(t, done)
}

// Clients that register within one millisecond keep their order: the
// waiters' set is scored to the microsecond. At whole milliseconds two such
// clients would tie, and Redis orders a tie by member, so the client whose
// id sorts first would be told first every time, whoever came first (a
// crowd on four clients drained one client's waiters before the others').
func TestWaitersOrderedWithinAMillisecond(t *testing.T) {
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "l", Owner: "holder:1", Lease: time.Minute})
	require.NoError(t, err)
	require.True(t, r.OK)
	register := func(client string) {
		r, err := scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "l", Owner: client + ":1", Lease: time.Minute,
			Wake: scripts.Wake{Client: client, Register: time.Minute}})
		require.NoError(t, err)
		require.False(t, r.OK)
	}
	waiters := scripts.Waiters("l")
	for try := 0; try < 200; try++ {
		require.NoError(t, s.Do("DEL", waiters).Error())
		register("z-first") // sorts last by id
		register("a-second")
		zs, err := s.Do("ZRANGE", waiters, "0", "-1", "WITHSCORES").AsZScores()
		require.NoError(t, err)
		require.Len(t, zs, 2)
		if math.Floor(zs[0].Score) != math.Floor(zs[1].Score) {
			continue // not within one millisecond: not the case under test
		}
		assert.Equal(t, []string{"z-first", "a-second"}, []string{zs[0].Member, zs[1].Member})
		return
	}
	t.Skip("no two registrations within one millisecond in 200 tries")
}

// The keys a plain lock's release sends, made in one allocation, are
// those every other script names.
func TestWaitersAndGrants(t *testing.T) {
	for _, name := range []string{"a", "lock:{tag}:x", ""} {
		w, g := scripts.WaitersAndGrants(name)
		if w != scripts.Waiters(name) || g != scripts.FairGrants(name) {
			t.Errorf("WaitersAndGrants(%q) = %q, %q; want %q, %q", name, w, g, scripts.Waiters(name), scripts.FairGrants(name))
		}
	}
}

// A guarded attempt takes the lock as an unguarded one does, with or
// without directed wakes, and in the lock's slot; after Abandon it does
// nothing, holder or not, and says so with no hold; another owner's
// guarded attempt is not stopped by it.
func TestGuardedAcquire(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		for _, a := range []scripts.Acquire{
			{Key: "g", Owner: "o:1", Lease: time.Minute, Guard: true},
			{Key: "{g}:x", Owner: "o:2", Lease: time.Minute, Guard: true, Wake: scripts.Wake{Client: "o", Settle: scripts.SettleKeep, Register: time.Second}},
		} {
			r, err := scripts.LockAcquire(ctx, rdb, a)
			require.NoError(t, err)
			assert.True(t, r.OK, a.Key)
			n, err := do("HGET", a.Key, a.Owner).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n)
		}

		require.NoError(t, scripts.Abandon(ctx, rdb, "h", "o:3", time.Minute))
		for _, acquire := range []func(context.Context, scripts.Conn, scripts.Acquire) (scripts.Acquired, error){scripts.LockAcquire, scripts.NonReentrantAcquire} {
			r, err := acquire(ctx, rdb, scripts.Acquire{Key: "h", Owner: "o:3", Lease: time.Minute, Guard: true})
			require.NoError(t, err)
			assert.False(t, r.OK)
			n, err := do("EXISTS", "h").AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "an abandoned attempt takes nothing")
		}
		r, err := scripts.NonReentrantAcquire(ctx, rdb, scripts.Acquire{Key: "h", Owner: "o:4", Lease: time.Minute, Guard: true})
		require.NoError(t, err)
		assert.True(t, r.OK, "another owner's attempt")
		ttl, err := do("PTTL", "relock_abandoned:{h}:o:3").AsInt64()
		require.NoError(t, err)
		assert.Greater(t, ttl, int64(50_000), "the guard lives as long as asked")

		// On the lock held, an abandoned attempt that would write its
		// client's offer writes nothing; one that would only register its
		// client registers it (see guard.lua).
		require.NoError(t, scripts.Abandon(ctx, rdb, "h", "o:5", time.Minute))
		wake := scripts.Wake{Client: "c", Register: time.Minute, OfferFirst: 7, OfferLast: 7, Offers: true}
		r, err = scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "h", Owner: "o:5", Lease: time.Minute, Guard: true, Wake: wake})
		require.NoError(t, err)
		assert.False(t, r.OK)
		n, err := do("EXISTS", "relock_grants:{h}", "relock_waiters:{h}").AsInt64()
		require.NoError(t, err)
		assert.Zero(t, n, "no offer, no registration")
		wake.OfferFirst, wake.OfferLast = 0, 0
		r, err = scripts.LockAcquire(ctx, rdb, scripts.Acquire{Key: "h", Owner: "o:5", Lease: time.Minute, Guard: true, Wake: wake})
		require.NoError(t, err)
		assert.False(t, r.OK)
		n, err = do("ZCARD", "relock_waiters:{h}").AsInt64()
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "registered")
	})
}

// A release leaves what Redisson's unlockInnerAsync leaves, from any hash
// an owner's field is in: the last hold of the only owner deletes the hash
// (by HDEL, in one command fewer), and so does the last hold beside
// another field, which Redisson's DEL takes with it; a count above 1 goes
// down by one with the lease as TTL; a count that is not a number fails as
// Redisson's HINCRBY does, changing nothing.
func TestReleaseFromAnyHash(t *testing.T) {
	ctx := context.Background()
	rel := scripts.Release{Key: "l", Owner: "o:1", RequestID: "r", Lease: time.Minute, LatchTTL: time.Minute, Publish: scripts.PublishClassic}
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		for _, c := range []struct {
			name   string
			fields []string
			want   scripts.Released
			left   map[string]string // the hash afterwards; nil: deleted
		}{
			{"only owner, last hold", []string{"o:1", "1"}, scripts.Freed, nil},
			{"beside another field", []string{"o:1", "1", "o:2", "1"}, scripts.Freed, nil},
			{"holds remain", []string{"o:1", "3"}, scripts.StillHeld, map[string]string{"o:1": "2"}},
			{"not the owner", []string{"o:2", "1"}, scripts.NotHeld, map[string]string{"o:2": "1"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				do("DEL", "l")
				require.NoError(t, do(append([]string{"HSET", "l"}, c.fields...)...).Error())
				got, err := rel.Run(ctx, rdb)
				require.NoError(t, err)
				assert.Equal(t, c.want, got)
				left, err := do("HGETALL", "l").AsStrMap()
				require.NoError(t, err)
				if c.left == nil {
					assert.Empty(t, left, "deleted")
					return
				}
				assert.Equal(t, c.left, left)
				if c.want == scripts.StillHeld {
					ttl, _ := do("PTTL", "l").AsInt64()
					assert.Greater(t, ttl, int64(50000), "the lease")
				}
			})
		}
		t.Run("count not a number", func(t *testing.T) {
			do("DEL", "l")
			require.NoError(t, do("HSET", "l", "o:1", "x").Error())
			_, err := rel.Run(ctx, rdb)
			require.Error(t, err)
			v, _ := do("HGET", "l", "o:1").ToString()
			assert.Equal(t, "x", v, "unchanged")
		})
	})
}
