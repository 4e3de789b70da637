package reentrant_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// Behind a cluster proxy (Redis Enterprise, Envoy and the like) relock
// sees one node, yet every command or script whose keys span two hash
// slots is refused with CROSSSLOT. redistest.StartProxyLike refuses them
// the same way, and a default rueidis client takes it for a single node.
// Nothing relock sends there may mix slots: not the watchdog's renewal
// batches, not the unlock-latch sweeps, not any lock's or synchronizer's
// scripts.
func TestBehindClusterProxy(t *testing.T) {
	s := redistest.StartProxyLike(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var lost atomic.Int64
	rounds := make(chan reentrant.Renewal, 64)
	c, err := reentrant.New(s.Client(), reentrant.Options{
		WatchdogTimeout: 3 * time.Second,
		Logger:          logger,
		OnLockLost:      func(string, reentrant.Owner, error) { lost.Add(1) },
		Hooks: reentrant.Hooks{Renewed: func(r reentrant.Renewal) {
			select {
			case rounds <- r:
			default:
			}
		}},
	})
	require.NoError(t, err)
	defer c.Close()
	other, err := reentrant.New(s.Client(), reentrant.Options{Logger: logger})
	require.NoError(t, err)
	defer other.Close()
	require.Equal(t, reentrant.PubSubClassic, c.PubSubMode(), "a proxy is taken for a single node")

	// 1,000 locks in some 950 slots, held through three renewal periods:
	// every round renews every hold, and none is lost.
	t.Run("1,000 holds through three watchdog periods", func(t *testing.T) {
		const n = 1000
		held := make([]context.Context, n)
		slots := map[uint16]bool{}
		for i := range held {
			name := fmt.Sprintf("proxied-%d", i)
			slots[scripts.Slot(name)] = true
			held[i], err = c.Lock(name).Lock(bg())
			require.NoError(t, err)
		}
		require.Greater(t, len(slots), 900)
		for full := 0; full < 3; {
			r := <-rounds
			require.NoError(t, r.Err, "renewal round")
			require.Zero(t, r.Failed, "holds a round failed to renew")
			if r.Holds == n {
				full++
			}
		}
		for i, h := range held {
			require.NoError(t, h.Err(), "hold %d", i)
			require.NoError(t, c.Lock(fmt.Sprintf("proxied-%d", i)).Unlock(h))
		}
		assert.Zero(t, lost.Load(), "holds lost")
	})

	// Each kind of lock, held by one client, waited for by another and
	// handed over on release; then MultiLock over locks in different slots.
	t.Run("every lock kind", func(t *testing.T) {
		for _, name := range []string{"kind", "{tagged}.kind"} {
			locks := map[string][2]*reentrant.Lock{
				"plain":  {c.Lock(name), other.Lock(name)},
				"fair":   {c.FairLock(name + ":fair"), other.FairLock(name + ":fair")},
				"fenced": {c.FencedLock(name + ":fenced"), other.FencedLock(name + ":fenced")},
				"spin":   {c.SpinLock(name+":spin", reentrant.Backoff{}), other.SpinLock(name+":spin", reentrant.Backoff{})},
				"write":  {c.ReadWriteLock(name + ":rw").WriteLock(), other.ReadWriteLock(name + ":rw").WriteLock()},
				"read":   {c.ReadWriteLock(name + ":rw2").ReadLock(), other.ReadWriteLock(name + ":rw2").WriteLock()},
			}
			for kind, pair := range locks {
				handOver(t, kind+" "+name, pair[0], pair[1])
			}
		}
		m := reentrant.NewMultiLock(c.Lock("multi-a"), c.Lock("multi-b"), c.Lock("multi-c"))
		held, err := m.Lock(bg())
		require.NoError(t, err)
		require.NoError(t, m.Unlock(held))
	})

	t.Run("every synchronizer", func(t *testing.T) {
		sem, sem2 := c.Semaphore("proxied-sem"), other.Semaphore("proxied-sem")
		_, err := sem.TrySetPermits(bg(), 1)
		require.NoError(t, err)
		require.NoError(t, sem.Acquire(bg(), 1))
		woken := make(chan error, 1)
		go func() { woken <- sem2.Acquire(bg(), 1, reentrant.WaitAtMost(20*time.Second)) }()
		require.NoError(t, sem.Release(bg(), 1))
		require.NoError(t, <-woken, "semaphore waiter")
		require.NoError(t, sem2.Release(bg(), 1))

		ps, ps2 := c.PermitExpirableSemaphore("proxied-permits"), other.PermitExpirableSemaphore("proxied-permits")
		_, err = ps.TrySetPermits(bg(), 1)
		require.NoError(t, err)
		p, err := ps.Acquire(bg())
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			p2, err := ps2.Acquire(bg(), reentrant.WaitAtMost(20*time.Second))
			if err == nil {
				err = p2.Release(bg())
			}
			got <- err
		}()
		require.NoError(t, p.Release(bg()))
		require.NoError(t, <-got, "permit waiter")

		latch := c.CountDownLatch("proxied-latch")
		_, err = latch.TrySetCount(bg(), 1)
		require.NoError(t, err)
		go func() { got <- other.CountDownLatch("proxied-latch").Await(bg(), reentrant.WaitAtMost(20*time.Second)) }()
		require.NoError(t, latch.CountDown(bg()))
		require.NoError(t, <-got, "latch waiter")

		for _, perClient := range []bool{false, true} {
			rl := c.RateLimiter(fmt.Sprintf("proxied-rate-%v", perClient))
			require.NoError(t, rl.SetRate(bg(), reentrant.Rate{Permits: 1, Interval: 300 * time.Millisecond, PerClient: perClient}))
			require.NoError(t, rl.Acquire(bg(), 1))
			require.NoError(t, rl.Acquire(bg(), 1, reentrant.WaitAtMost(20*time.Second)), "rate limiter waiter")
			_, err := rl.Available(bg())
			require.NoError(t, err)
		}
	})

	// Each release queues its unlock latch for deletion, and the sweeper
	// deletes many at once: here latches of 100 slots, deleted long before
	// their 10 s TTL would have removed them.
	t.Run("unlock latches deleted", func(t *testing.T) {
		for i := 0; i < 100; i++ {
			l := c.Lock(fmt.Sprintf("swept-%d", i))
			held, err := l.Lock(bg())
			require.NoError(t, err)
			require.NoError(t, l.Unlock(held))
		}
		redistest.Eventually(t, 5*time.Second, "no unlock latch left", func() bool {
			keys, err := s.Do("KEYS", "redisson_unlock_latch:*").AsStrSlice()
			return err == nil && len(keys) == 0
		})
	})

	assert.Zero(t, lost.Load(), "holds lost")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "CROSSSLOT") {
			t.Fatalf("logged: %s", line)
		}
	}
}

// handOver holds a lock on a, makes b wait for it, re-enters on a, and
// releases: b must be handed the lock.
func handOver(t *testing.T, what string, a, b *reentrant.Lock) {
	t.Helper()
	held, err := a.Lock(bg())
	require.NoError(t, err, what)
	got := make(chan error, 1)
	go func() {
		h, err := b.Lock(bg(), reentrant.WaitAtMost(20*time.Second))
		if err == nil {
			err = b.Unlock(h)
		}
		got <- err
	}()
	again, err := a.Lock(held)
	require.NoError(t, err, "%s: re-entry", what)
	require.NoError(t, a.Unlock(again), what)
	require.NoError(t, a.Unlock(held), what)
	require.NoError(t, <-got, "%s: the waiter on another client", what)
}
