package reentrant_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
)

// waitersKey is the set in which relock clients waiting on lock name
// register for directed wakes.
func waitersKey(name string) string { return "relock_waiters:{" + name + "}" }

// counted is a patient client whose hooks count its acquire attempts.
type counted struct {
	*reentrant.Client
	attempts atomic.Int64
}

func (e env) counted(t *testing.T) *counted {
	c := &counted{}
	c.Client = e.client(t, reentrant.Options{RepollInterval: time.Minute, Hooks: reentrant.Hooks{
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) { c.attempts.Add(int64(a.Attempts)) },
	}})
	return c
}

// Six relock clients wait on a lock a relock client holds. Each release
// tells one of them, the one registered longest: they take the lock in the
// order they registered, each lets the release's message on Redisson's
// channel pass, and none makes an attempt beyond its first, the one right
// after subscribing, and the one that wins. With every client woken by every release (Redisson's
// protocol, and relock's before directed wakes), the later waiters would
// try after each release: 33 attempts instead of at most 18.
func TestDirectedWakes(t *testing.T) {
	e := onRedis(t)
	holder := e.client(t)
	const name = "directed"
	held, err := holder.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)

	const clients = 6
	var scripts int64
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	var waiters []*counted
	for i := 0; i < clients; i++ {
		c := e.counted(t)
		waiters = append(waiters, c)
		scripts = e.server.ScriptCalls() // New's rights probe included
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := c.Lock(name).Lock(bg())
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, c.ID())
			mu.Unlock()
			assert.NoError(t, c.Lock(name).Unlock(held))
		}()
		// One at a time, so that the order of registration is known: each
		// has registered, subscribed, and made the attempt that follows
		// (a newcomer's attempt may take a lock just freed, as in any lock
		// that is not fair).
		scripts += 2
		eventually(t, "the waiter to register, subscribe and try again", func() bool {
			return e.server.ScriptCalls() == scripts && e.int(t, "ZCARD", waitersKey(name)) == int64(i+1) &&
				e.numsub(t, wakeChannel(c.Client, name)) == 1
		})
	}
	registered, err := e.do(t, "ZRANGE", waitersKey(name), "0", "-1").AsStrSlice()
	require.NoError(t, err)
	assert.Equal(t, int64(clients), e.numsub(t, "redisson_lock__channel:{"+name+"}"),
		"relock waiters listen on Redisson's channel too, and let a relock release's message pass")

	require.NoError(t, holder.Lock(name).Unlock(held))
	waitAll(t, &wg, 30*time.Second, func() {})
	assert.Equal(t, registered, order, "served in the order they registered")
	total := int64(0)
	for _, c := range waiters {
		n := c.attempts.Load()
		total += n
		assert.LessOrEqual(t, n, int64(3), "attempts of one waiter")
	}
	t.Logf("%d waiters, %d attempts", clients, total)
	assert.Zero(t, e.int(t, "ZCARD", waitersKey(name)), "every client left the set")
}

// A wake that misses passes on at once: to a registered client that nobody
// hears on (it died: here a made-up id), and to one whose waiter is gone
// (here its wait was cancelled, and its channel still lingers). The waiter
// behind them is told at once, not at its re-poll a minute later.
func TestDirectedWakePassesOn(t *testing.T) {
	e := onRedis(t)
	holder := e.client(t)
	const name = "passes-on"
	held, err := holder.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)

	// First in line: a client that died. Then one that gave up. Each
	// waiter has made both its attempts (before and after subscribing)
	// before the next comes and before the release, so the last can take
	// the lock only when told.
	e.do(t, "ZADD", waitersKey(name), "1", "8d8ac610-566d-8ef0-9c22-186b2a5ed793")
	gaveUp, waiter := e.patient(t), e.patient(t)
	// A call whose ctx can end sends its attempts guarded: load that
	// script first, so that the count below sees no NOSCRIPT retry.
	loadCtx, loaded := context.WithCancel(bg())
	warm, err := gaveUp.Lock("warm-up").Lock(loadCtx, reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	require.NoError(t, gaveUp.Lock("warm-up").Unlock(warm))
	loaded()
	scripts := e.server.ScriptCalls()
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	// With a lease of its own it takes no handoffs, so it has no offer to
	// take back when it gives up, which would drop its client at once.
	go func() { _, err := gaveUp.Lock(name).Lock(ctx, reentrant.LeaseFor(time.Minute)); done <- err }()
	eventually(t, "the first waiter to register", func() bool {
		return e.int(t, "ZCARD", waitersKey(name)) == 2 && e.server.ScriptCalls() == scripts+2
	})
	got := make(chan error, 1)
	go func() {
		held, err := waiter.Lock(name).Lock(bg())
		if err == nil {
			err = waiter.Lock(name).Unlock(held)
		}
		got <- err
	}()
	eventually(t, "the second waiter to register, subscribe and try again", func() bool {
		return e.int(t, "ZCARD", waitersKey(name)) == 3 && e.numsub(t, wakeChannel(waiter, name)) == 1 &&
			e.server.ScriptCalls() == scripts+4
	})
	cancel()
	require.ErrorIs(t, recv(t, done), context.Canceled)
	assert.Equal(t, int64(3), e.int(t, "ZCARD", waitersKey(name)), "a waiter that gives up stays registered")

	before := e.server.ScriptCalls()
	require.NoError(t, holder.Lock(name).Unlock(held))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter behind a dead client and a gone waiter was not told")
	}
	assert.Zero(t, e.int(t, "ZCARD", waitersKey(name)), "the dead and the gone were dropped")
	// A handful (the release, one pass-on, the waiter's attempts and its
	// release; 6 when written): a wake that came back to the client that
	// passed it on would be passed on again and again while that client's
	// channel lingers, thousands of times.
	calls := e.server.ScriptCalls() - before
	t.Logf("%d script calls from the release on", calls)
	assert.LessOrEqual(t, calls, int64(12), "the wake was passed on once")
}

// In a mixed deployment nothing waits for a wake-up that does not come:
// relock's release still publishes on Redisson's channel, a message Redisson
// reads as 0, so a Redisson waiter is woken as before; and a relock waiter
// listens on Redisson's channel too, so Redisson's release wakes it. Every
// holder here leases the lock for a minute, and every relock waiter
// re-polls once a minute: a missed wake-up would cost that long.
func TestDirectedWakesMixed(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	const name = "mixed"
	a, b := e.patient(t), e.patient(t)

	// relock holds; relock and Redisson wait.
	held, err := a.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		held, err := b.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
		if assert.NoError(t, err) {
			assert.NoError(t, b.Lock(name).Unlock(held))
		}
	}()
	go func() {
		defer wg.Done()
		if assert.NoError(t, java.Lock(bg(), name, 1)) {
			_, err := java.Unlock(bg(), name, 1)
			assert.NoError(t, err)
		}
	}()
	eventually(t, "both waiters", func() bool {
		return e.numsub(t, wakeChannel(b, name)) == 1 && e.numsub(t, "redisson_lock__channel:{"+name+"}") == 2
	})
	start := time.Now()
	require.NoError(t, a.Lock(name).Unlock(held))
	waitAll(t, &wg, 30*time.Second, func() {})
	t.Logf("a relock and a Redisson waiter through in %v", time.Since(start))

	// Redisson holds; relock waiters of two clients wait.
	pttl, err := java.TryAcquire(bg(), name, 2)
	require.NoError(t, err)
	require.Zero(t, pttl)
	var through atomic.Int64
	for _, c := range []*reentrant.Client{a, b, a} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := c.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
			if assert.NoError(t, err) {
				through.Add(1)
				assert.NoError(t, c.Lock(name).Unlock(held))
			}
		}()
	}
	eventually(t, "the relock waiters to listen on Redisson's channel", func() bool {
		return e.numsub(t, "redisson_lock__channel:{"+name+"}") == 2
	})
	_, err = java.Unlock(bg(), name, 2)
	require.NoError(t, err)
	waitAll(t, &wg, 30*time.Second, func() {})
	assert.Equal(t, int64(3), through.Load())
}

// A release that tells no relock client directly, here an operator's
// forceUnlock from Java of a lock a relock client holds, still wakes relock
// waiters at once: they listen on Redisson's channel too. The holder
// leases the lock for a minute and the waiters re-poll once a minute, so a
// missed message would cost that long.
func TestForeignReleaseWakesRelockWaiters(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	const name = "foreign"
	holder, b, c := e.patient(t), e.patient(t), e.patient(t)
	_, err := holder.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)

	var wg sync.WaitGroup
	for _, w := range []*reentrant.Client{b, c, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := w.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
			if assert.NoError(t, err) {
				assert.NoError(t, w.Lock(name).Unlock(held))
			}
		}()
	}
	eventually(t, "the waiters of both clients registered and listening", func() bool {
		return e.int(t, "ZCARD", waitersKey(name)) == 2 && e.numsub(t, "redisson_lock__channel:{"+name+"}") == 2
	})
	start := time.Now()
	deleted, err := java.ForceUnlock(bg(), name)
	require.NoError(t, err)
	require.True(t, deleted)
	waitAll(t, &wg, 30*time.Second, func() {})
	t.Logf("three relock waiters through %v after a forceUnlock from Java", time.Since(start))
}
