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
// Nothing relock sends there may mix slots: not the unlock-latch sweeps,
// not any lock's or synchronizer's scripts. The watchdog's renewals try it
// once (on one node they need far fewer calls so), and keep to one slot
// per script from the proxy's refusal on, within the same round.
func TestBehindClusterProxy(t *testing.T) {
	s := redistest.StartProxyLike(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var lost atomic.Int64
	rounds, hooks := renewalRounds()
	c, err := reentrant.New(s.Client(), reentrant.Options{
		WatchdogTimeout: 3 * time.Second,
		Logger:          logger,
		OnLockLost:      func(string, reentrant.Owner, error) { lost.Add(1) },
		Hooks:           hooks,
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
			r := recv(t, rounds)
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

	// Each lock kind handed over between two clients, both ways, with and
	// without a hash tag; each synchronizer's waiter woken from another
	// client; a MultiLock over three slots.
	t.Run("every kind", func(t *testing.T) {
		exercise(t, c, other, "proxied:")
		for kind, pair := range lockKinds(c, other, "{tagged}.") {
			handOver(t, kind+" with a tag", pair[0], pair[1])
		}
		m := reentrant.NewMultiLock(c.Lock("multi-a"), c.Lock("multi-b"), c.Lock("multi-c"))
		held, err := m.Lock(bg())
		require.NoError(t, err)
		require.NoError(t, m.Unlock(held))
	})

	// A release that writes an unlock latch (here an inner release of a
	// reentrant hold; one that frees the lock writes none) queues it for
	// deletion, and the sweeper deletes many at once: here latches of 100
	// slots, deleted long before their 10 s TTL would have removed them.
	t.Run("unlock latches deleted", func(t *testing.T) {
		for i := 0; i < 100; i++ {
			l := c.Lock(fmt.Sprintf("swept-%d", i))
			outer, err := l.Lock(bg())
			require.NoError(t, err)
			inner, err := l.Lock(outer)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(inner))
			require.NoError(t, l.Unlock(outer))
		}
		redistest.Eventually(t, 5*time.Second, "no unlock latch left", func() bool {
			keys, err := s.Do("KEYS", "redisson_unlock_latch:*").AsStrSlice()
			return err == nil && len(keys) == 0
		})
	})

	assert.Zero(t, lost.Load(), "holds lost")
	const learnt = "renewals keep to one hash slot per script from now on"
	assert.Equal(t, 1, strings.Count(logs.String(), learnt), "renewals refused across slots, once")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "CROSSSLOT") && !strings.Contains(line, learnt) {
			t.Fatalf("logged: %s", line)
		}
	}
}

// On one node a renewal script takes locks of many hash slots: 300 locks
// in some 290 slots are renewed with 3 calls of RenewBatchSize (100)
// each, where a script per slot took some 290. (The first round sends
// each call twice, EVALSHA then EVAL, until the script is loaded.)
func TestRenewalsSpanSlotsOnOneNode(t *testing.T) {
	s := redistest.Start(t)
	rounds, hooks := renewalRounds()
	c, err := reentrant.New(s.Client(), reentrant.Options{
		WatchdogTimeout: 3 * time.Second,
		Hooks:           hooks,
	})
	require.NoError(t, err)
	defer c.Close()
	const n = 300
	held := make([]context.Context, n)
	for i := range held {
		held[i], err = c.Lock(fmt.Sprintf("spread-%d", i)).Lock(bg())
		require.NoError(t, err)
	}
	require.NoError(t, s.Do("CONFIG", "RESETSTAT").Error())
	most := 0 // calls the rounds since may make: two per 100 holds
	for r := range rounds {
		require.NoError(t, r.Err, "renewal round")
		require.Zero(t, r.Failed, "holds a round failed to renew")
		most += 2 * ((r.Holds + 99) / 100)
		if r.Holds == n {
			break
		}
	}
	calls := int(s.ScriptCalls())
	assert.LessOrEqual(t, calls, most, "script calls for the rounds up to one of all %d holds", n)
	for i, h := range held {
		require.NoError(t, h.Err(), "hold %d", i)
	}
}

// renewalRounds returns hooks that report the watchdog's renewal rounds on
// the channel, dropping those that find it full.
func renewalRounds() (chan reentrant.Renewal, reentrant.Hooks) {
	rounds := make(chan reentrant.Renewal, 64)
	return rounds, reentrant.Hooks{Renewed: func(r reentrant.Renewal) {
		select {
		case rounds <- r:
		default:
		}
	}}
}
