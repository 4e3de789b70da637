package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// Tokens grow strictly across owners and clients, in the order the lock was
// held; a re-entry draws a new, larger token (as Redisson's RFencedLock).
func TestFencedTokens(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		clients := []*reentrant.Client{e.client(t), e.client(t)}
		var mu sync.Mutex
		var seen []int64 // tokens in the order they were held
		var wg sync.WaitGroup
		for w := 0; w < 6; w++ {
			wg.Add(1)
			go func(f *reentrant.Lock) {
				defer wg.Done()
				for r := 0; r < 10; r++ {
					held, err := f.Lock(bg())
					if !assert.NoError(t, err) {
						return
					}
					token, ok := reentrant.TokenFrom(held)
					assert.True(t, ok)
					mu.Lock()
					seen = append(seen, token)
					mu.Unlock()
					assert.NoError(t, f.Unlock(held))
				}
			}(clients[w%2].FencedLock("fenced"))
		}
		waitAll(t, &wg, redistest.Within, func() {})
		require.Len(t, seen, 60)
		for i := 1; i < len(seen); i++ {
			assert.Greater(t, seen[i], seen[i-1], "token %d", i)
		}
		f := clients[0].FencedLock("fenced")
		outer, err := f.Lock(bg())
		require.NoError(t, err)
		inner, err := f.Lock(outer)
		require.NoError(t, err)
		t1, _ := reentrant.TokenFrom(outer)
		t2, _ := reentrant.TokenFrom(inner)
		assert.Greater(t, t2, t1, "re-entry draws a larger token")
		counter, err := e.do(t, "GET", "redisson_lock_token:{fenced}").AsInt64()
		require.NoError(t, err)
		assert.Equal(t, t2, counter)
		n, _ := f.HoldCount(inner)
		assert.Equal(t, 2, n)
		require.NoError(t, f.Unlock(inner))
		require.NoError(t, f.Unlock(outer))
	})
}

// A fenced lock is an RLock hash: a Redisson RLock holder excludes it and its
// release wakes a fenced waiter.
func TestFencedRedissonInterop(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	f := e.patient(t).FencedLock("shared-fenced")
	require.NoError(t, java.Lock(bg(), "shared-fenced", 1))
	_, ok, err := f.TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok)
	got := make(chan int64, 1)
	go func() {
		held, err := f.Lock(bg())
		if assert.NoError(t, err) {
			assert.NoError(t, f.Unlock(held))
			token, _ := reentrant.TokenFrom(held)
			got <- token
		}
	}()
	eventually(t, "the fenced waiter's subscription", func() bool { return e.numsub(t, "redisson_lock__channel:{shared-fenced}") == 1 })
	_, err = java.Unlock(bg(), "shared-fenced", 1)
	require.NoError(t, err)
	select {
	case token := <-got:
		assert.Positive(t, token)
	case <-time.After(30 * time.Second):
		t.Fatal("fenced waiter not woken by the Redisson release")
	}
	// A Java RFencedLock draws from the same counter (INCR): relock's next
	// token is larger than Java's, and Java's next is larger than relock's.
	javaToken, err := e.do(t, "INCR", "redisson_lock_token:{shared-fenced}").AsInt64()
	require.NoError(t, err)
	held, err := f.Lock(bg())
	require.NoError(t, err)
	token, _ := reentrant.TokenFrom(held)
	assert.Greater(t, token, javaToken)
	require.NoError(t, f.Unlock(held))
	javaToken, err = e.do(t, "INCR", "redisson_lock_token:{shared-fenced}").AsInt64()
	require.NoError(t, err)
	assert.Greater(t, javaToken, token)
}

// Redis losing the token counter (a restart without persistence, a failover
// that missed it) does not send tokens back to 1: they never fall below the
// server's clock in microseconds, so a store that saw the old tokens still
// accepts the new holder's. Also a counter that runs ahead of the clock (a
// Java INCR, many acquisitions) is only ever incremented.
func TestFencedTokensSurviveDataLoss(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		f := e.client(t).FencedLock("lossy")
		held, err := f.Lock(bg())
		require.NoError(t, err)
		before, _ := reentrant.TokenFrom(held)
		require.NoError(t, f.Unlock(held))
		assert.Greater(t, before, time.Now().Add(-time.Hour).UnixMicro(), "the first token is the server clock")

		_, err = e.do(t, "DEL", "redisson_lock_token:{lossy}").AsInt64()
		require.NoError(t, err)
		held, err = f.Lock(bg())
		require.NoError(t, err)
		after, _ := reentrant.TokenFrom(held)
		require.NoError(t, f.Unlock(held))
		assert.Greater(t, after, before, "a token after the counter was lost")

		ahead := after + 1e12 // far ahead of any clock
		require.NoError(t, e.do(t, "SET", "redisson_lock_token:{lossy}", strconv.FormatInt(ahead, 10)).Error())
		held, err = f.Lock(bg())
		require.NoError(t, err)
		next, _ := reentrant.TokenFrom(held)
		require.NoError(t, f.Unlock(held))
		assert.Equal(t, ahead+1, next, "a counter ahead of the clock is incremented")
	})
}

// drawToken takes fenced lock f and gives it back, and returns the
// token the acquisition drew.
func drawToken(t *testing.T, f *reentrant.Lock) int64 {
	t.Helper()
	held, err := f.Lock(bg())
	require.NoError(t, err)
	token, _ := reentrant.TokenFrom(held)
	require.NoError(t, f.Unlock(held))
	return token
}

// Redisson #6510: RFencedLock's token counters never expire, one key per name
// for good (25 million of them there). A fenced lock's token counter lives
// FencingCounterTTL (a day by default) after its last draw, and tokens stay
// strictly increasing across its expiry, being floored to the server's clock:
// on miniredis a day is skipped, on Redis a short TTL runs out. Names fenced
// and released leave no key behind once it has.
func TestFencingCounterExpires(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		draw := func(f *reentrant.Lock) int64 { return drawToken(t, f) }
		gone := func(key string) {
			t.Helper()
			eventually(t, key+" to expire", func() bool { return e.int(t, "EXISTS", key) == 0 })
		}
		daily := e.client(t).FencedLock("daily")
		first := draw(daily)
		ttl := time.Duration(e.int(t, "PTTL", "redisson_lock_token:{daily}")) * time.Millisecond
		assert.True(t, ttl > 23*time.Hour && ttl <= 24*time.Hour, "a day by default: %v", ttl)
		short := e.client(t, reentrant.Options{FencingCounterTTL: 100 * time.Millisecond})
		if e.mini != nil {
			e.mini.FastForward(24*time.Hour + time.Millisecond) // a day later
			gone("redisson_lock_token:{daily}")
			assert.Greater(t, draw(daily), first, "a token after the counter expired")
		} else {
			f := short.FencedLock("daily")
			second := draw(f)
			assert.Greater(t, second, first)
			gone("redisson_lock_token:{daily}")
			assert.Greater(t, draw(f), second, "a token after the counter expired")
		}

		// Many names, each fenced once and released: nothing stays once
		// the counters expire.
		require.NoError(t, e.do(t, "FLUSHALL").Error())
		for i := 0; i < 1000; i++ {
			draw(short.FencedLock("name" + strconv.Itoa(i)))
		}
		if e.mini != nil {
			e.mini.FastForward(time.Second)
		}
		eventually(t, "every counter to expire", func() bool { return e.int(t, "DBSIZE") == 0 })
	})
}

// Names shared with Java keep their counter, as Redisson does
// (FencingCounterTTL NoExpiry, which FromRedissonConfig sets): an expired
// counter would give Java's RFencedLock token 1, below relock's. With it,
// a counter another relock client gave a TTL is kept for good from the
// first draw, and tokens grow across Java and Go.
func TestFencingCounterSharedWithJava(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	cfg, err := reentrant.FromRedissonConfig([]byte("singleServerConfig:\n  address: \"redis://" + e.server.Addr + "\"\n"))
	require.NoError(t, err)
	require.Equal(t, reentrant.NoExpiry, cfg.Options.FencingCounterTTL)
	asJava := e.client(t, cfg.Options).FencedLock("shared")
	expiring := e.client(t, reentrant.Options{FencingCounterTTL: 100 * time.Millisecond}).FencedLock("shared")
	draw := func(f *reentrant.Lock) int64 { return drawToken(t, f) }

	goToken := draw(expiring)
	assert.Positive(t, e.int(t, "PTTL", "redisson_lock_token:{shared}"))
	goToken2 := draw(asJava)
	assert.Greater(t, goToken2, goToken)
	assert.Equal(t, int64(-1), e.int(t, "PTTL", "redisson_lock_token:{shared}"), "kept for good")
	javaToken, pttl, err := java.FencedTryAcquire(bg(), "shared", 1)
	require.NoError(t, err)
	require.Zero(t, pttl, "Java holds it")
	assert.Greater(t, javaToken, goToken2, "Java's token after Go's")
	_, err = java.Unlock(bg(), "shared", 1)
	require.NoError(t, err)
	assert.Greater(t, draw(asJava), javaToken, "Go's token after Java's")

	// Why: a counter that expired gives Java token 1.
	draw(expiring)
	eventually(t, "the counter to expire", func() bool { return e.int(t, "EXISTS", "redisson_lock_token:{shared}") == 0 })
	javaToken, _, err = java.FencedTryAcquire(bg(), "shared", 1)
	require.NoError(t, err)
	assert.Equal(t, int64(1), javaToken, "Java's INCR starts again at 1")
	_, err = java.Unlock(bg(), "shared", 1)
	require.NoError(t, err)
}

// A Java holder's lock excludes a relock spin waiter, which gets it by
// backing off, not by the message; a relock spin release lets a Java
// waiter in by its own polling bound.
func TestSpinRedissonInterop(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	spin := e.client(t).SpinLock("shared-spin", reentrant.Backoff{Max: 10 * time.Millisecond})
	require.NoError(t, java.Lock(bg(), "shared-spin", 1))
	_, ok, err := spin.TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok)
	got := make(chan error, 1)
	go func() {
		h, err := spin.Lock(bg())
		if err == nil {
			err = spin.Unlock(h)
		}
		got <- err
	}()
	_, err = java.Unlock(bg(), "shared-spin", 1)
	require.NoError(t, err)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("spin waiter never got the lock")
	}
	h, err := spin.Lock(bg())
	require.NoError(t, err)
	pttl, err := java.TryAcquire(bg(), "shared-spin", 2)
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0), "a spin hold excludes Java")
	require.NoError(t, spin.Unlock(h))
	require.NoError(t, java.Lock(bg(), "shared-spin", 2))
	_, err = java.Unlock(bg(), "shared-spin", 2)
	require.NoError(t, err)
}

// A spin lock's release publishes nothing: the first message the channel
// carries after it is a marker sent later. Spinning waiters still exclude
// one another.
func TestSpinLock(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		msgs := e.subscribe(t, "redisson_lock__channel:{spin}")
		mu := c.SpinLock("spin", reentrant.Backoff{})
		held, err := mu.Lock(bg())
		require.NoError(t, err)
		require.NoError(t, mu.Unlock(held))
		require.NoError(t, e.do(t, "PUBLISH", "redisson_lock__channel:{spin}", "marker").Error())
		assert.Equal(t, "marker", receive(t, msgs), "the release published nothing before the marker")

		var locks []*reentrant.Lock
		for w := 0; w < 6; w++ {
			locks = append(locks, e.client(t).SpinLock("spin", reentrant.Backoff{Min: time.Millisecond, Max: 8 * time.Millisecond}))
		}
		overlaps, _ := contend(t, locks, 10)
		assert.Zero(t, overlaps)
	})
}

// Do releases after an error and after a panic.
func TestDo(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	boom := errors.New("boom")
	err := c.Do(bg(), "do", func(ctx context.Context) error {
		held, _ := c.Lock("do").IsHeld(ctx)
		assert.True(t, held, "fn runs with the held context")
		return boom
	})
	assert.ErrorIs(t, err, boom)
	assert.False(t, e.mini.Exists("do"))
	assert.PanicsWithValue(t, "bad", func() {
		c.Do(bg(), "do", func(context.Context) error { panic("bad") })
	})
	assert.False(t, e.mini.Exists("do"), "released before the panic went on")
}

// Two multi-locks over the same locks taken in opposite orders, from two
// clients, never deadlock and never hold a lock twice at once.
func TestMultiLockNoDeadlock(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		m1 := reentrant.NewMultiLock(a.Lock("m:x"), a.Lock("m:y"), a.Lock("m:z"))
		m2 := reentrant.NewMultiLock(b.Lock("m:z"), b.Lock("m:y"))
		var insideY atomic.Bool
		var overlaps atomic.Int64
		done := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(m *reentrant.MultiLock) {
				defer wg.Done()
				for r := 0; r < 15; r++ {
					held, err := m.Lock(bg())
					if !assert.NoError(t, err) {
						return
					}
					if !insideY.CompareAndSwap(false, true) {
						overlaps.Add(1)
					}
					time.Sleep(200 * time.Microsecond)
					insideY.Store(false)
					assert.NoError(t, m.Unlock(held))
				}
			}([]*reentrant.MultiLock{m1, m2}[w%2])
		}
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("multi-locks deadlocked")
		}
		assert.Zero(t, overlaps.Load())
		for _, k := range []string{"m:x", "m:y", "m:z"} {
			assert.Equal(t, int64(0), e.int(t, "EXISTS", k), k)
		}

		// All or nothing: with m:z held elsewhere, m1 takes none of its locks.
		held, err := b.Lock("m:z").Lock(bg())
		require.NoError(t, err)
		_, ok, err := m1.TryLock(bg(), reentrant.WaitAtMost(30*time.Millisecond))
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "m:x"))
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "m:y"))
		require.NoError(t, b.Lock("m:z").Unlock(held))
	})
}

// Redlock over 5 independent redis-servers.
func TestRedlock(t *testing.T) {
	var servers []*redistest.Server
	var locks, others []*reentrant.Lock
	for i := 0; i < 5; i++ {
		s := redistest.Start(t)
		servers = append(servers, s)
		e := env{server: s, admin: s.Client()}
		locks = append(locks, e.client(t).Lock("red"))
		others = append(others, e.client(t).Lock("red"))
	}
	rl, rival := reentrant.NewRedlock(locks...), reentrant.NewRedlock(others...)
	const lease = 5 * time.Second

	held, err := rl.Lock(bg(), reentrant.LeaseFor(lease))
	require.NoError(t, err)
	valid, ok := held.Deadline()
	require.True(t, ok, "the validity is the held context's deadline")
	validity := time.Until(valid)
	assert.Greater(t, validity, lease*9/10)
	assert.Less(t, validity, lease)
	// Reentrant on every master.
	again, err := rl.Lock(held, reentrant.LeaseFor(lease))
	require.NoError(t, err)
	require.NoError(t, rl.Unlock(again))
	n, err := locks[0].HoldCount(held)
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// A master restarted without its data does not let a rival in while a
	// quorum still holds.
	servers[4].Restart()
	_, err = rival.Lock(bg(), reentrant.LeaseFor(lease), reentrant.RetryCount(2))
	assert.ErrorIs(t, err, reentrant.ErrNoQuorum)
	assert.ErrorIs(t, err, reentrant.ErrNotAcquired)
	assert.NoError(t, held.Err())
	require.NoError(t, rl.Unlock(held))
	for i, s := range servers {
		assert.Equal(t, int64(0), mustInt(t, s, "EXISTS", "red"), "master %d released", i)
	}

	// With 2 of 5 masters down the lock works; with 3 down it fails cleanly
	// and leaves nothing on the live ones.
	servers[0].Kill()
	servers[1].Kill()
	held, err = rl.Lock(bg(), reentrant.LeaseFor(lease))
	require.NoError(t, err)
	require.NoError(t, rl.Unlock(held))
	servers[2].Kill()
	_, err = rl.Lock(bg(), reentrant.LeaseFor(lease), reentrant.RetryCount(1))
	assert.ErrorIs(t, err, reentrant.ErrNoQuorum)
	for _, s := range servers[3:] {
		assert.Equal(t, int64(0), mustInt(t, s, "EXISTS", "red"))
	}
}

// Validity shrinks with the time an attempt takes: a paused master costs
// its per-master timeout (lease/10).
func TestRedlockValidityShrinks(t *testing.T) {
	var servers []*redistest.Server
	var locks []*reentrant.Lock
	for i := 0; i < 3; i++ {
		s := redistest.Start(t)
		servers = append(servers, s)
		locks = append(locks, env{server: s, admin: s.Client()}.client(t).Lock("v"))
	}
	rl := reentrant.NewRedlock(locks...)
	const lease = 2 * time.Second
	validity := func(held context.Context) time.Duration {
		d, _ := held.Deadline()
		return time.Until(d)
	}
	held, err := rl.Lock(bg(), reentrant.LeaseFor(lease))
	require.NoError(t, err)
	fast := validity(held)
	require.NoError(t, rl.Unlock(held))
	servers[2].Pause()
	defer servers[2].Resume()
	held, err = rl.Lock(bg(), reentrant.LeaseFor(lease))
	require.NoError(t, err)
	slow := validity(held)
	t.Logf("validity %v with every master answering, %v with one paused", fast, slow)
	assert.Less(t, slow, fast-lease/20, "the paused master's timeout is taken off")
	recv(t, held.Done())
	assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost, "ends with its validity")
}

func mustInt(t *testing.T, s *redistest.Server, args ...string) int64 {
	t.Helper()
	n, err := s.Do(args...).AsInt64()
	require.NoError(t, err, fmt.Sprint(args))
	return n
}
