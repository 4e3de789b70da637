package scripts

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// recorder is a rueidis.Client that sends nothing (its B is Client's): it keeps the last
// script call's keys and args, so a test can build a call as the
// package's functions do.
type recorder struct {
	rueidis.Client
	last call
}

func (r *recorder) Do(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	a := cmd.Commands() // EVALSHA sha numkeys keys... args...
	n, _ := strconv.Atoi(a[2])
	r.last = call{keys: a[3 : 3+n], args: a[3+n:]}
	return rueidis.NewErrorResult(context.Canceled)
}

// callOf returns the call that run makes, built by rdb.
func callOf(rdb rueidis.Client, run func(context.Context, Conn)) call {
	r := &recorder{Client: rdb}
	run(context.Background(), Conn{Client: r})
	return r.last
}

// TestManyRepliesAsEachCallAlone: calls that went as one call of many.lua
// each get the reply, and leave the keys as, their call alone would: a
// lock taken, one held by another, a re-entry refused, a key of another
// type, a release, a release by one who holds nothing. One call's error
// does not stop the calls after it.
func TestManyRepliesAsEachCallAlone(t *testing.T) {
	for _, server := range []string{"redis-server", "miniredis"} {
		t.Run(server, func(t *testing.T) {
			var rdb rueidis.Client
			if server == "miniredis" {
				_, rdb = redistest.Miniredis(t)
			} else {
				rdb = redistest.Start(t).Client()
			}
			ctx := context.Background()
			do := func(args ...string) {
				require.NoError(t, rdb.Do(ctx, rdb.B().Arbitrary(args...).Build()).Error())
			}
			do("HSET", "held", "other:1", "1")
			do("PEXPIRE", "held", "60000")
			do("HSET", "mine", "me:1", "1")
			do("SET", "text", "x")
			acquire := func(key string) call {
				return callOf(rdb, func(ctx context.Context, c Conn) {
					LockAcquire(ctx, c, Acquire{Key: key, Owner: "me:1", Lease: 30 * time.Second})
				})
			}
			calls := []call{acquire("free"), acquire("held"), acquire("text"), acquire("free2")}
			co := NewCoalescer(rdb, false, ctx, func(func()) bool { return false })
			replies := co.many(ctx, line{s: acquireScript}, calls)
			require.Len(t, replies, 4)
			got := func(i int) (Acquired, error) { return acquireReply(replies[i], nil) }
			a, err := got(0)
			assert.NoError(t, err)
			assert.True(t, a.OK, "a free lock is taken")
			a, err = got(1)
			assert.NoError(t, err)
			assert.False(t, a.OK, "a lock held by another is not")
			assert.InDelta(t, 60*time.Second, a.PTTL, float64(5*time.Second))
			_, err = got(2)
			assert.True(t, IsWrongType(err), "a key of another type: %v", err)
			a, err = got(3)
			assert.NoError(t, err)
			assert.True(t, a.OK, "the call after an error runs")
			for _, k := range []string{"free", "free2"} {
				n, err := rdb.Do(ctx, rdb.B().Hget().Key(k).Field("me:1").Build()).AsInt64()
				require.NoError(t, err)
				assert.EqualValues(t, 1, n, k)
			}
			assert.Equal(t, "x", must(rdb.Do(ctx, rdb.B().Get().Key("text").Build()).ToString()))

			reentry := callOf(rdb, func(ctx context.Context, c Conn) {
				NonReentrantAcquire(ctx, c, Acquire{Key: "mine", Owner: "me:1", Lease: 30 * time.Second})
			})
			fresh := callOf(rdb, func(ctx context.Context, c Conn) {
				NonReentrantAcquire(ctx, c, Acquire{Key: "fresh", Owner: "me:1", Lease: 30 * time.Second})
			})
			replies = co.many(ctx, line{s: nonReentrantAcquireScript}, []call{reentry, fresh})
			_, err = acquireReply(replies[0], nil)
			assert.Equal(t, CodeReentry, Code(err), "a re-entry is refused: %v", err)
			a, err = acquireReply(replies[1], nil)
			assert.NoError(t, err)
			assert.True(t, a.OK)

			release := func(key string) call {
				return callOf(rdb, func(ctx context.Context, c Conn) {
					Release{Key: key, Owner: "me:1", RequestID: "r", Lease: 30 * time.Second, LatchTTL: 10 * time.Second, Publish: PublishClassic, Believed: true}.Run(ctx, c)
				})
			}
			replies = co.many(ctx, line{s: releaseScript}, []call{release("free"), release("held"), release("mine")})
			for i, want := range []Released{Freed, NotHeld, Freed} {
				r, err := releaseReply(replies[i], nil)
				assert.NoError(t, err)
				assert.Equal(t, want, r, "release %d", i)
			}
			for k, want := range map[string]int64{"free": 0, "held": 1, "mine": 0, "free2": 1} {
				n, err := rdb.Do(ctx, rdb.B().Exists().Key(k).Build()).AsInt64()
				require.NoError(t, err)
				assert.Equal(t, want, n, k)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestManyBehindAClusterProxy: a server that looks like one node but
// refuses a script whose keys span hash slots (a cluster proxy) refuses a
// coalesced call of locks in two slots whole, so nothing ran: each call is
// sent alone, and from then on only calls of one slot go together.
func TestManyBehindAClusterProxy(t *testing.T) {
	s := redistest.StartProxyLike(t)
	rdb := s.Client()
	ctx := context.Background()
	acquire := func(key string) call {
		return callOf(rdb, func(ctx context.Context, c Conn) {
			LockAcquire(ctx, c, Acquire{Key: key, Owner: "me:1", Lease: 30 * time.Second})
		})
	}
	a, b := "proxied:a", "proxied:b"
	require.NotEqual(t, Slot(a), Slot(b))
	co := NewCoalescer(rdb, false, ctx, func(func()) bool { return false })
	replies := co.many(ctx, line{s: acquireScript}, []call{acquire(a), acquire(b)})
	for i, r := range replies {
		got, err := acquireReply(r, nil)
		require.NoError(t, err, "call %d", i)
		assert.True(t, got.OK, "call %d", i)
	}
	assert.False(t, co.spanSlots.Load(), "calls of two slots no longer go together")
	for _, k := range []string{a, b} {
		n, err := rdb.Do(ctx, rdb.B().Hget().Key(k).Field("me:1").Build()).AsInt64()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "%s: taken once", k)
	}
}
