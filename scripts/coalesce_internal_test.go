package scripts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
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
	onBothServers(t, func(t *testing.T, rdb rueidis.Client, _ bool) {
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

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// onBothServers runs f on a redis-server and on miniredis; real says which
// (only a real one counts its commands, see commandCalls).
func onBothServers(t *testing.T, f func(t *testing.T, rdb rueidis.Client, real bool)) {
	for _, server := range []string{"redis-server", "miniredis"} {
		t.Run(server, func(t *testing.T) {
			if server == "miniredis" {
				_, rdb := redistest.Miniredis(t)
				f(t, rdb, false)
				return
			}
			f(t, redistest.Start(t).Client(), true)
		})
	}
}

// doer returns a func that sends a command to rdb and fails the test if
// it fails.
func doer(t *testing.T, rdb rueidis.Client) func(args ...string) rueidis.RedisResult {
	return func(args ...string) rueidis.RedisResult {
		r := rdb.Do(context.Background(), rdb.B().Arbitrary(args...).Build())
		require.NoError(t, r.Error())
		return r
	}
}

// commandCalls returns how many times the server ran command name, its
// scripts' calls included (INFO commandstats); 0 on miniredis, which does
// not count.
func commandCalls(rdb rueidis.Client, name string) int64 {
	info, err := rdb.Do(context.Background(), rdb.B().Info().Section("commandstats").Build()).ToString()
	_, after, ok := strings.Cut(info, "cmdstat_"+name+":calls=")
	if err != nil || !ok {
		return 0
	}
	n, _ := strconv.ParseInt(after[:strings.IndexByte(after, ',')], 10, 64)
	return n
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

// together makes calls, each on a goroutine of its own through co, so that
// they go to Redis as one call of s's many.lua: s's line is held busy
// until all have queued. It returns once every call has returned.
func together(t *testing.T, co *Coalescer, s *script, calls ...func(Conn)) {
	t.Helper()
	ln := line{s: s}
	hold, held := make(chan struct{}), make(chan struct{})
	go co.lines.Do(context.Background(), ln, call{}, func(context.Context, call) rueidis.RedisResult {
		close(held)
		<-hold
		return rueidis.NewErrorResult(context.Canceled)
	})
	<-held
	done := make(chan struct{}, len(calls))
	for _, f := range calls {
		go func() {
			f(Conn{Client: co.client, Coalesce: co})
			done <- struct{}{}
		}()
	}
	redistest.Eventually(t, 10*time.Second, "every call queued", func() bool { return co.lines.Queued(ln) == len(calls) })
	close(hold)
	for range calls {
		<-done
	}
}

// TestSynchronizersCoalesced: the synchronizers' commonest scripts, called
// together, answer each call as it would have been answered alone: a
// semaphore's permits, a permit-expirable semaphore's, a rate limiter's
// window, a fenced lock's tokens.
func TestSynchronizersCoalesced(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	closing, stop := context.WithCancel(ctx)
	defer stop()
	co := NewCoalescer(rdb, false, closing, func(f func()) bool { go f(); return true })

	_, err := SemaphoreTrySet(ctx, Conn{Client: rdb}, "sem", 3, 0, PublishClassic)
	require.NoError(t, err)
	got := make([]bool, 3)
	together(t, co, semAcquireScript,
		func(c Conn) { got[0], err = SemaphoreAcquire(ctx, c, "sem", 2) },
		func(c Conn) { got[1], _ = SemaphoreAcquire(ctx, c, "sem", 2) },
		func(c Conn) { got[2], _ = SemaphoreAcquire(ctx, c, "sem", 1) },
	)
	require.NoError(t, err)
	assert.Equal(t, 2, countTrue(got), "3 permits: 2 and 1 taken, one of the asks for 2 refused: %v", got)
	n, err := Count(ctx, Conn{Client: rdb}, "sem")
	require.NoError(t, err)
	assert.Zero(t, n)
	together(t, co, semReleaseScript,
		func(c Conn) { SemaphoreRelease(ctx, c, "sem", 2, PublishClassic) },
		func(c Conn) { SemaphoreRelease(ctx, c, "sem", 1, PublishClassic) },
	)
	n, err = Count(ctx, Conn{Client: rdb}, "sem")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)

	require.NoError(t, PermitSet(ctx, Conn{Client: rdb}, "permits", 2, PublishClassic))
	ids := []string{"00000000000000000000000000000001", "00000000000000000000000000000002", "00000000000000000000000000000003"}
	got = make([]bool, 3)
	together(t, co, permitAcquireScript,
		func(c Conn) { got[0], _, _, _ = PermitAcquire(ctx, c, "permits", ids[:1], time.Minute, PublishClassic) },
		func(c Conn) {
			got[1], _, _, _ = PermitAcquire(ctx, c, "permits", ids[1:2], time.Minute, PublishClassic)
		},
		func(c Conn) { got[2], _, _, _ = PermitAcquire(ctx, c, "permits", ids[2:], time.Minute, PublishClassic) },
	)
	assert.Equal(t, 2, countTrue(got), "2 permits for 3 asks: %v", got)
	released := make([]bool, 3)
	together(t, co, permitReleaseScript,
		func(c Conn) { released[0], _ = PermitRelease(ctx, c, "permits", ids[0], PublishClassic) },
		func(c Conn) { released[1], _ = PermitRelease(ctx, c, "permits", ids[1], PublishClassic) },
		func(c Conn) { released[2], _ = PermitRelease(ctx, c, "permits", ids[2], PublishClassic) },
	)
	assert.Equal(t, got, released, "each permit taken is given back, the one refused is not")
	available, taken, err := PermitCount(ctx, Conn{Client: rdb}, "permits", PublishClassic)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{2, 0}, [2]int64{available, taken})

	_, err = RateSet(ctx, Conn{Client: rdb}, "rate", "c1", Rate{Permits: 2, Interval: time.Hour}, false)
	require.NoError(t, err)
	got = make([]bool, 3)
	together(t, co, rateAcquireScript,
		func(c Conn) { got[0], _, _ = RateAcquire(ctx, c, "rate", "c1", 1) },
		func(c Conn) { got[1], _, _ = RateAcquire(ctx, c, "rate", "c1", 1) },
		func(c Conn) { got[2], _, _ = RateAcquire(ctx, c, "rate", "c1", 1) },
	)
	assert.Equal(t, 2, countTrue(got), "a rate of 2 an hour: %v", got)

	tokens := make([]int64, 3)
	together(t, co, fencedAcquireScript,
		func(c Conn) {
			a, _ := FencedAcquire(ctx, c, Acquire{Key: "f1", Owner: "o:1", Lease: time.Minute})
			tokens[0] = a.Token
		},
		func(c Conn) {
			a, _ := FencedAcquire(ctx, c, Acquire{Key: "f1", Owner: "o:2", Lease: time.Minute})
			tokens[1] = a.Token
		},
		func(c Conn) {
			a, _ := FencedAcquire(ctx, c, Acquire{Key: "f2", Owner: "o:3", Lease: time.Minute})
			tokens[2] = a.Token
		},
	)
	taken = 0
	for _, tok := range tokens {
		if tok != 0 {
			taken++
		}
	}
	assert.EqualValues(t, 2, taken, "f1 once, f2 once: %v", tokens)
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// TestManyWritesARegistrationOnce: a client's failed attempts that go as
// one call write its registration and offer once, as each would have
// left them alone; a win that takes the client out of the set between two
// of them is not undone by the one after it, which registers the client
// again.
func TestManyWritesARegistrationOnce(t *testing.T) {
	onBothServers(t, func(t *testing.T, rdb rueidis.Client, real bool) {
		ctx := context.Background()
		do := doer(t, rdb)
		do("HSET", "held", "other:1", "1")
		do("PEXPIRE", "held", "60000")
		co := NewCoalescer(rdb, false, ctx, func(func()) bool { return false })
		attempt := func(key, owner string, settle Settle) call {
			return callOf(rdb, func(ctx context.Context, c Conn) {
				LockAcquire(ctx, c, Acquire{Key: key, Owner: owner, Lease: 30 * time.Second, Wake: Wake{
					Client: "me", Register: 5 * time.Second, Settle: settle, OfferFirst: 7, OfferLast: 9, Offers: true, Listens: time.Second}})
			})
		}
		// registered: the client is in lock's waiters' set, not as a
		// mark (see wakelib.lua).
		registered := func(lock string) bool {
			score, err := rdb.Do(ctx, rdb.B().Zscore().Key(waiters(lock)).Member("me").Build()).AsFloat64()
			return err == nil && score < 1e13
		}
		before := commandCalls(rdb, "zadd")
		var calls []call
		for i := 1; i <= 4; i++ {
			calls = append(calls, attempt("held", "me:"+strconv.Itoa(10+i), SettleKeep))
		}
		for i, r := range co.many(ctx, line{s: acquireScript}, calls) {
			a, err := acquireReply(r, nil)
			require.NoError(t, err)
			assert.False(t, a.OK, "attempt %d", i)
		}
		assert.True(t, registered("held"), "registered")
		assert.Regexp(t, `^7:\d+:9$`, must(rdb.Do(ctx, rdb.B().Hget().Key(grants("held")).Field("me").Build()).ToString()))
		if real {
			assert.EqualValues(t, 1, commandCalls(rdb, "zadd")-before, "four attempts, one registration written")
		}

		// On a free lock: the first takes it, the second fails and
		// registers the client, the third (the holder again, its last
		// waiter) takes the client out, and the fourth fails: the
		// client must be registered again.
		calls = []call{attempt("free", "me:1", SettleKeep), attempt("free", "me:2", SettleKeep),
			attempt("free", "me:1", SettleDrop), attempt("free", "me:3", SettleKeep)}
		replies := co.many(ctx, line{s: acquireScript}, calls)
		for i, want := range []bool{true, false, true, false} {
			a, err := acquireReply(replies[i], nil)
			require.NoError(t, err)
			assert.Equal(t, want, a.OK, "attempt %d", i)
		}
		assert.True(t, registered("free"), "registered again after the drop, not left a mark or out")
	})
}

// TestManyReadsALockOnce: attempts on one lock that go as one call read
// the lock once (PTTL, HKEYS) and each answers as alone; an attempt that
// takes the lock makes the next read it again, so one after it finds it
// held, and its owner's re-entry finds it its own. A key of another type
// fails every attempt on it.
func TestManyReadsALockOnce(t *testing.T) {
	onBothServers(t, func(t *testing.T, rdb rueidis.Client, real bool) {
		ctx := context.Background()
		do := doer(t, rdb)
		do("HSET", "held", "other:1", "1")
		do("PEXPIRE", "held", "60000")
		do("SET", "text", "x")
		co := NewCoalescer(rdb, false, ctx, func(func()) bool { return false })
		attempt := func(key, owner string) call {
			return callOf(rdb, func(ctx context.Context, c Conn) {
				LockAcquire(ctx, c, Acquire{Key: key, Owner: owner, Lease: 30 * time.Second})
			})
		}
		pttls, hkeys := commandCalls(rdb, "pttl"), commandCalls(rdb, "hkeys")
		replies := co.many(ctx, line{s: acquireScript}, []call{attempt("held", "me:1"), attempt("held", "me:2"),
			attempt("held", "me:3"), attempt("text", "me:4"), attempt("text", "me:5")})
		for i := range 3 {
			a, err := acquireReply(replies[i], nil)
			require.NoError(t, err)
			assert.False(t, a.OK)
			assert.InDelta(t, 60*time.Second, a.PTTL, float64(5*time.Second), "attempt %d", i)
		}
		for i := 3; i < 5; i++ {
			_, err := acquireReply(replies[i], nil)
			assert.True(t, IsWrongType(err), "attempt %d on a key of another type: %v", i, err)
		}
		if real {
			assert.EqualValues(t, 1, commandCalls(rdb, "hkeys")-hkeys-2, "the held lock's owners read once (and the other type's twice, failing)")
			assert.EqualValues(t, 1+2, commandCalls(rdb, "pttl")-pttls, "the held lock's PTTL read once")
		}

		replies = co.many(ctx, line{s: acquireScript}, []call{attempt("free", "me:1"), attempt("free", "me:2"), attempt("free", "me:1")})
		for i, want := range []bool{true, false, true} {
			a, err := acquireReply(replies[i], nil)
			require.NoError(t, err)
			assert.Equal(t, want, a.OK, "attempt %d", i)
		}
		assert.Equal(t, map[string]string{"me:1": "2"}, must(rdb.Do(ctx, rdb.B().Hgetall().Key("free").Build()).AsStrMap()))
	})
}

// TestUnsent: a call is sent again only when what failed it was another
// call's dial or greeting: a failed dial, or a cancel with its own ctx
// alive; never after its own ctx ended, and never on a deadline, which a
// call that was written may read.
func TestUnsent(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("operation was canceled")}
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{live, dial, true},
		{live, context.Canceled, true},
		{live, fmt.Errorf("greeting: %w", context.Canceled), true},
		{cancelled, context.Canceled, false},
		{cancelled, dial, false},
		{live, context.DeadlineExceeded, false},
		{live, io.EOF, false},
		{live, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, false},
	} {
		assert.Equal(t, c.want, unsent(c.ctx, rueidis.NewErrorResult(c.err)), "%v with ctx %v", c.err, c.ctx.Err())
	}
}
