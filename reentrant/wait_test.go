package reentrant_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
)

// numsub returns PUBSUB NUMSUB for one channel: how many connections are
// subscribed to it.
func (e env) numsub(t *testing.T, channel string) int64 {
	t.Helper()
	m, err := e.do(t, "PUBSUB", "NUMSUB", channel).AsIntMap()
	require.NoError(t, err)
	return m[channel]
}

// patient returns a client whose waiters re-poll only once a minute, so a
// test that finishes sooner proves that a message woke them.
func (e env) patient(t *testing.T) *reentrant.Client {
	return e.client(t, reentrant.Options{RepollInterval: time.Minute})
}

// 1,000 goroutines wait on one lock through one client: one subscription
// serves them all, they pass one at a time, and the channel is dropped
// afterwards.
func Test1000Waiters(t *testing.T) {
	e := onRedis(t)
	holder, c := e.client(t), e.patient(t)
	channel := wakeChannel(c, "crowd")
	held, err := holder.Lock("crowd").Lock(bg())
	require.NoError(t, err)

	const waiters = 1000
	var inside atomic.Bool
	var overlaps, done atomic.Int64
	var wg sync.WaitGroup
	var turns handoffs
	wctx, cancel := context.WithCancel(bg())
	defer cancel()
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu := c.Lock("crowd")
			ctx, err := mu.Lock(wctx)
			if !assert.NoError(t, err) {
				return
			}
			turns.took()
			if !inside.CompareAndSwap(false, true) {
				overlaps.Add(1)
			}
			done.Add(1)
			inside.Store(false)
			assert.NoError(t, mu.Unlock(ctx))
		}()
	}
	eventually(t, "the subscription", func() bool { return e.numsub(t, channel) == 1 })
	clients, err := e.do(t, "CLIENT", "LIST", "TYPE", "pubsub").ToString()
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(clients, "\n"), "one subscribed connection:\n%s", clients)
	released := time.Now()
	require.NoError(t, holder.Lock("crowd").Unlock(held))
	waitAll(t, &wg, time.Minute, cancel)
	// A missed wake-up would leave a gap of a TTL (30s) or a re-poll (a
	// minute).
	gap := turns.longest(released)
	t.Logf("%d waiters through in %v; longest gap between turns %v", waiters, time.Since(released), gap)
	assert.Less(t, gap, 3*time.Second)
	assert.Equal(t, int64(waiters), done.Load())
	assert.Zero(t, overlaps.Load())
	// Every channel is dropped: the client's wake channel, and Redisson's,
	// which its waiters listened on too and which may linger a moment
	// longer (see directed.Handoffs.ListensFor).
	eventually(t, "every channel to be dropped", func() bool {
		chans, err := e.do(t, "PUBSUB", "CHANNELS").AsStrSlice()
		require.NoError(t, err)
		return len(chans) == 0
	})
}

// CLIENT KILL TYPE pubsub while waiters wait: the client resubscribes on its
// own, and a release made while it was disconnected is not missed.
func TestSubscriberKilled(t *testing.T) {
	e := onRedis(t)
	holder, c := e.client(t), e.patient(t)
	channel := wakeChannel(c, "killed")
	run := func(t *testing.T, waitForResubscribe bool) {
		held, err := holder.Lock("killed").Lock(bg())
		require.NoError(t, err)
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, err := c.Lock("killed").Lock(bg())
				if assert.NoError(t, err) {
					assert.NoError(t, c.Lock("killed").Unlock(ctx))
				}
			}()
		}
		eventually(t, "the subscription", func() bool { return e.numsub(t, channel) == 1 })
		require.NoError(t, e.do(t, "CLIENT", "KILL", "TYPE", "pubsub").Error())
		if waitForResubscribe {
			eventually(t, "the resubscription", func() bool { return e.numsub(t, channel) == 1 })
		}
		start := time.Now()
		require.NoError(t, holder.Lock("killed").Unlock(held))
		wg.Wait()
		t.Logf("3 waiters through in %v after the release", time.Since(start))
		// Missed, the release would cost the holder's TTL (30s) or the
		// re-poll (a minute).
		assert.Less(t, time.Since(start), 3*time.Second, "woken, not re-polled")
	}
	t.Run("release after resubscribe", func(t *testing.T) { run(t, true) })
	t.Run("release while disconnected", func(t *testing.T) { run(t, false) })
}

// A Redisson client's release (a raw PUBLISH of "0") wakes a relock waiter,
// and relock's release wakes a Redisson waiter; each excludes the other.
func TestRedissonInterop(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	java := redissontest.New(e.rdb(t))

	// Redisson holds; relock waits and is woken by Redisson's release.
	require.NoError(t, java.Lock(bg(), "shared", 1))
	got := make(chan time.Time, 1)
	go func() {
		ctx, err := c.Lock("shared").Lock(bg())
		if assert.NoError(t, err) {
			at := time.Now()
			assert.NoError(t, c.Lock("shared").Unlock(ctx))
			got <- at
		}
	}()
	eventually(t, "relock's subscription", func() bool { return e.numsub(t, "redisson_lock__channel:{shared}") == 1 })
	_, ok, err := c.Lock("shared").TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "Redisson's hold excludes relock")
	released := time.Now()
	held, err := java.Unlock(bg(), "shared", 1)
	require.NoError(t, err)
	require.True(t, held)
	select {
	case at := <-got:
		t.Logf("relock waiter woke %v after the Redisson release", at.Sub(released))
	case <-time.After(30 * time.Second):
		t.Fatal("relock waiter not woken by the Redisson release")
	}

	// relock holds; Redisson waits and is woken by relock's release.
	ctx, err := c.Lock("shared").Lock(bg())
	require.NoError(t, err)
	pttl, err := java.TryAcquire(bg(), "shared", 2)
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0), "relock's hold excludes Redisson")
	javaGot := make(chan error, 1)
	go func() { javaGot <- java.Lock(bg(), "shared", 2) }()
	eventually(t, "Redisson's subscription", func() bool { return e.numsub(t, "redisson_lock__channel:{shared}") >= 1 })
	require.NoError(t, c.Lock("shared").Unlock(ctx))
	select {
	case err := <-javaGot:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Redisson waiter not woken by relock's release")
	}
	_, err = java.Unlock(bg(), "shared", 2)
	require.NoError(t, err)

	// Both sides contend; an in-section flag catches any overlap. Every
	// holder leases the lock for 30 s, and relock waiters re-poll once a
	// minute: a waiter that missed a wake-up would hold the phase (0.3 s
	// when written) up for that long.
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	var inside atomic.Bool
	var overlaps atomic.Int64
	enter := func() {
		if !inside.CompareAndSwap(false, true) {
			overlaps.Add(1)
		}
		time.Sleep(200 * time.Microsecond)
		inside.Store(false)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for r := 0; r < 20; r++ {
				ctx, err := c.Lock("shared").Lock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				enter()
				assert.NoError(t, c.Lock("shared").Unlock(ctx))
			}
		}()
		go func(tid int64) {
			defer wg.Done()
			for r := 0; r < 20; r++ {
				if !assert.NoError(t, java.Lock(ctx, "shared", tid)) {
					return
				}
				enter()
				_, err := java.Unlock(bg(), "shared", tid)
				assert.NoError(t, err)
			}
		}(int64(10 + i))
	}
	waitAll(t, &wg, 10*time.Second, cancel)
	assert.Zero(t, overlaps.Load())
}

// A wait cut short by its ctx leaves no subscription behind.
func TestCancelWhileWaitingUnsubscribes(t *testing.T) {
	e := onRedis(t)
	holder, c := e.client(t), e.patient(t)
	_, err := holder.Lock("cancelled").Lock(bg())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg())
	result := make(chan error, 1)
	go func() {
		_, err := c.Lock("cancelled").Lock(ctx)
		result <- err
	}()
	eventually(t, "the subscription", func() bool { return e.numsub(t, wakeChannel(c, "cancelled")) == 1 })
	cancelled := time.Now()
	cancel()
	select {
	case err := <-result:
		t.Logf("returned %v after cancel", time.Since(cancelled))
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled wait did not return")
	}
	eventually(t, "the channel to be dropped", func() bool { return e.numsub(t, wakeChannel(c, "cancelled")) == 0 })
}

// holderEnv names the environment variable that makes the test binary a
// lock-holding child process (see TestHolderCrashed).
const holderEnv = "RELOCK_TEST_HOLDER"

// runHolder takes a lock on the Redis at addr, says "held" and waits to be
// killed. It runs in a child process made by TestHolderCrashed.
func runHolder(spec string) {
	addr, name, _ := strings.Cut(spec, "|")
	name, how, _ := strings.Cut(name, "|")
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: time.Second})
	if err != nil {
		panic(err)
	}
	lk := c.Lock(name)
	if how == "read" {
		lk = c.ReadWriteLock(name).ReadLock()
	}
	if _, err := lk.Lock(context.Background()); err != nil {
		panic(err)
	}
	os.Stdout.WriteString("held\n")
	select {}
}

// The holder's process dies (SIGKILL) without releasing: nothing is
// published, the key expires, and the waiter acquires within the TTL plus
// the re-poll interval.
func TestHolderCrashed(t *testing.T) {
	e := onRedis(t)
	const ttl, repoll = time.Second, 200 * time.Millisecond
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holderEnv+"="+e.server.Addr+"|crashed")
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)

	c := e.client(t, reentrant.Options{RepollInterval: repoll})
	_, ok, err := c.Lock("crashed").TryLock(bg())
	require.NoError(t, err)
	require.False(t, ok, "the child holds it")
	acquired := make(chan time.Time, 1)
	go func() {
		ctx, err := c.Lock("crashed").Lock(bg())
		if assert.NoError(t, err) {
			at := time.Now()
			assert.NoError(t, c.Lock("crashed").Unlock(ctx))
			acquired <- at
		}
	}()
	eventually(t, "the waiter's subscription", func() bool { return e.numsub(t, wakeChannel(c, "crashed")) == 1 })
	require.NoError(t, child.Process.Kill())
	killed := time.Now()
	select {
	case at := <-acquired:
		t.Logf("acquired %v after the holder was killed (TTL %v, re-poll %v)", at.Sub(killed), ttl, repoll)
		assert.Less(t, at.Sub(killed), ttl+repoll+time.Second)
	case <-time.After(30 * time.Second):
		t.Fatal("waiter stranded after the holder crashed")
	}
}

// A holder that died releases nothing and publishes nothing: its waiters
// wake when its key expires, at the PTTL their attempt was told, not at the
// next re-poll (an hour here).
func TestWaiterWakesAtExpiry(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{RepollInterval: time.Hour})
	for _, l := range []*reentrant.Lock{c.Lock("died"), c.FairLock("died-fair")} {
		e.do(t, "HSET", l.Name(), "00000000-0000-4000-8000-000000000000:1", "1")
		e.do(t, "PEXPIRE", l.Name(), "300")
		ctx, cancel := context.WithTimeout(bg(), 15*time.Second)
		held, err := l.Lock(ctx)
		cancel()
		require.NoError(t, err, "%s: woken at the key's expiry", l.Name())
		require.NoError(t, l.Unlock(held))
	}
}

// A waiter whose ctx ends as a wake-up comes makes no attempt after it:
// one sent could still win, and hand a hold to a caller that gave up. Here
// the ctx is cancelled by the hook that reports the wake-up, after the
// waiter's two attempts (before and after subscribing).
func TestWokenAfterCancelSendsNothing(t *testing.T) {
	e := onRedis(t)
	holder := e.client(t)
	held, err := holder.Lock("woken-cancelled").Lock(bg())
	require.NoError(t, err)
	type cancelKey struct{}
	ended := make(chan reentrant.Acquire, 1)
	c := e.client(t, reentrant.Options{RepollInterval: time.Minute, Hooks: reentrant.Hooks{
		Woken:        func(ctx context.Context, _ reentrant.Kind, _ string) { ctx.Value(cancelKey{}).(context.CancelFunc)() },
		AcquireEnded: func(_ context.Context, a reentrant.Acquire) { ended <- a },
	}})
	before := e.server.ScriptCalls()
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		_, err := c.Lock("woken-cancelled").Lock(context.WithValue(ctx, cancelKey{}, cancel))
		got <- err
	}()
	eventually(t, "the waiter's two attempts", func() bool { return e.server.ScriptCalls() >= before+2 })
	require.NoError(t, holder.Lock("woken-cancelled").Unlock(held))
	select {
	case err := <-got:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	a := recv(t, ended)
	assert.Equal(t, 2, a.Attempts, "no attempt after the cancel")
	assert.False(t, a.Held)
}
