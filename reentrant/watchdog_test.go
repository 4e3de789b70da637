package reentrant_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// countingConn counts the commands written that contain a marker.
type countingConn struct {
	net.Conn
	marker []byte
	n      *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.n.Add(int64(bytes.Count(b, c.marker)))
	return c.Conn.Write(b)
}

// renewSHA is the SHA1 of renew.lua, as sent in EVALSHA.
func renewSHA(t *testing.T) []byte {
	body, err := os.ReadFile("../scripts/renew.lua")
	require.NoError(t, err)
	sum := sha1.Sum(body)
	return []byte(hex.EncodeToString(sum[:]))
}

// fakeTimeClient is a relock client on a miniredis whose TTLs follow the
// synctest bubble's clock; renewals counts renew.lua calls.
func fakeTimeClient(t *testing.T, opts reentrant.Options) (*miniredis.Miniredis, *reentrant.Client, *atomic.Int64) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	renewals := new(atomic.Int64)
	marker := renewSHA(t)
	rdb := redistest.MiniredisClient(t, m, rueidis.ClientOption{
		InitAddress: []string{"miniredis"},
		DialCtxFn: func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
			conn, err := m.Dial()
			return countingConn{Conn: conn, marker: marker, n: renewals}, err
		},
	})
	c, err := reentrant.New(rdb, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(); rdb.Close(); m.Close() })
	return m, c, renewals
}

// A lock held for ten minutes of (fake) time with the 30s timeout survives;
// each renewal period costs ceil(locks/batch) script calls, not one per lock,
// for locks whose names share a hash tag (a batch never spans two slots).
func TestWatchdogLongHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c, renewals := fakeTimeClient(t, reentrant.Options{RenewBatchSize: 100})
		const locks = 250
		held := make([]context.Context, locks)
		for i := range held {
			var err error
			held[i], err = c.Lock(fmt.Sprintf("{jobs}:%d", i)).Lock(bg())
			require.NoError(t, err)
		}
		start := time.Now()
		time.Sleep(10*time.Minute + time.Second)
		synctest.Wait()
		for i, h := range held {
			require.NoError(t, h.Err(), "lock %d lost", i)
		}
		for _, k := range []string{"{jobs}:0", "{jobs}:249"} {
			assert.Greater(t, m.TTL(k), 19*time.Second, "renewed within the last period")
		}
		periods := int64(time.Since(start) / (10 * time.Second))
		assert.Equal(t, periods*3, renewals.Load(), "ceil(250/100) = 3 script calls per period over %d periods", periods)
		for i, h := range held {
			require.NoError(t, c.Lock(fmt.Sprintf("{jobs}:%d", i)).Unlock(h))
		}
		for i := range held {
			assert.False(t, m.Exists(fmt.Sprintf("{jobs}:%d", i)))
		}
	})
}

// A key deleted under its holder: the held context is cancelled with
// ErrLockLost within one renewal period, the OnLockLost hook hears of it,
// and nothing renews the lock again.
func TestWatchdogKeyDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hooked atomic.Value
		m, c, renewals := fakeTimeClient(t, reentrant.Options{
			OnLockLost: func(name string, owner reentrant.Owner, cause error) { hooked.Store(name + " " + cause.Error()) },
		})
		held, err := c.Lock("deleted").Lock(bg())
		require.NoError(t, err)
		m.Del("deleted")
		deleted := time.Now()
		<-held.Done()
		assert.LessOrEqual(t, time.Since(deleted), 10*time.Second, "within one renewal period")
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrNotRenewed)
		synctest.Wait()
		assert.Contains(t, hooked.Load(), "deleted")

		before := renewals.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, before, renewals.Load(), "no renewal for a lost lock")
		err = c.Lock("deleted").Unlock(held)
		assert.ErrorIs(t, err, reentrant.ErrLockLost, "Unlock says the hold was lost, and why")
		assert.ErrorIs(t, err, reentrant.ErrNotRenewed)
	})
}

// An explicit lease is not renewed; its held context is cancelled just
// before Redis expires the key. A lease that runs its course is not a
// loss: the cause is ErrLeaseEnded, not ErrLockLost; OnLockLost is not
// called and nothing is logged above debug; HoldEnded sees ErrLeaseEnded.
// An Unlock that comes later returns ErrLeaseEnded, whether the key is
// still there or has expired.
func TestLeaseEndsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		var lost atomic.Int64
		var ended atomic.Value
		m, c, renewals := fakeTimeClient(t, reentrant.Options{
			Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
			OnLockLost: func(string, reentrant.Owner, error) { lost.Add(1) },
			Hooks:      reentrant.Hooks{HoldEnded: func(_ context.Context, e reentrant.HoldEnd) { ended.Store(e.Cause) }},
		})
		for _, late := range []time.Duration{0, time.Second} {
			start := time.Now()
			held, err := c.Lock("leased").Lock(bg(), reentrant.LeaseFor(5*time.Second))
			require.NoError(t, err)
			<-held.Done()
			assert.Equal(t, 4500*time.Millisecond, time.Since(start), "lease minus its 10%% margin")
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrLeaseEnded)
			assert.NotErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
			synctest.Wait()
			assert.ErrorIs(t, ended.Load().(error), reentrant.ErrLeaseEnded)
			assert.True(t, m.Exists("leased"), "the key still has its last 500ms")
			time.Sleep(late)
			assert.Equal(t, late == 0, m.Exists("leased"))
			err = c.Lock("leased").Unlock(held)
			assert.ErrorIs(t, err, reentrant.ErrLeaseEnded, "Unlock %v after the lease ended", late)
			assert.NotErrorIs(t, err, reentrant.ErrLockLost)
			m.Del("leased")
		}
		assert.Zero(t, renewals.Load())
		assert.Zero(t, lost.Load(), "OnLockLost")
		assert.Empty(t, logs.String())
	})
}

// Re-entry with a lease into a hold the watchdog keeps does not shorten it;
// releasing the watchdog's acquisition leaves the lease in charge.
func TestMixedLeaseReentry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c, _ := fakeTimeClient(t, reentrant.Options{})
		mu := c.Lock("mixed")
		outer, err := mu.Lock(bg())
		require.NoError(t, err)
		inner, err := mu.Lock(outer, reentrant.LeaseFor(time.Second))
		require.NoError(t, err)
		assert.Equal(t, 30*time.Second, m.TTL("mixed"))
		time.Sleep(time.Minute)
		require.NoError(t, inner.Err(), "the watchdog keeps the whole hold")
		require.NoError(t, mu.Unlock(inner))

		leased, err := c.Lock("mixed2").Lock(bg(), reentrant.LeaseFor(time.Minute))
		require.NoError(t, err)
		kept, err := c.Lock("mixed2").Lock(leased)
		require.NoError(t, err)
		time.Sleep(5 * time.Minute)
		synctest.Wait() // let the renewal round of this instant finish
		require.NoError(t, leased.Err(), "renewed while the watchdog's acquisition is held")
		require.NoError(t, c.Lock("mixed2").Unlock(kept))
		assert.Equal(t, time.Minute, m.TTL("mixed2"), "release restores the lease")
		<-leased.Done()
		assert.ErrorIs(t, context.Cause(leased), reentrant.ErrLeaseEnded)
		require.NoError(t, mu.Unlock(outer))
	})
}

// Redisson #5697 and #5698: the watchdog went more than a TTL without
// renewing, the lock expired, and another thread took it while the first went
// on unaware. Real Redis stops answering (SIGSTOP) or dies (SIGKILL): the
// holder's context is cancelled by the local deadline, before the key's TTL on
// the server could have run out.
func TestWatchdogRedisUnreachable(t *testing.T) {
	for _, fault := range []string{"paused", "killed"} {
		t.Run(fault, func(t *testing.T) {
			e := onRedis(t)
			const timeout = 900 * time.Millisecond
			c := e.client(t, reentrant.Options{WatchdogTimeout: timeout})
			sent := time.Now()
			held, err := c.Lock("unreachable").Lock(bg())
			require.NoError(t, err)
			// Let a renewal or two be confirmed first.
			time.Sleep(timeout / 2)
			lastSafe := time.Now()
			if fault == "paused" {
				e.server.Pause()
				defer e.server.Resume()
			} else {
				e.server.Kill()
			}
			select {
			case <-held.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("holder never told")
			}
			cancelled := time.Now()
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrUnconfirmed)
			// The server's TTL runs from a renewal sent at or before
			// lastSafe, and no renewal after the fault was confirmed.
			assert.True(t, cancelled.Before(lastSafe.Add(timeout)), "cancelled %v after the fault; TTL %v", cancelled.Sub(lastSafe), timeout)
			assert.True(t, cancelled.After(sent), "sanity")
		})
	}
}

// 10,000 cycles of acquire (reentrant depth 1-3), each cut short by a
// cancel at a random point or ended by Unlock. Afterwards the watchdog holds
// nothing, no renewal runs, and every key expires: none is kept alive.
func TestNoZombies(t *testing.T) {
	e := onRedis(t)
	const timeout = 600 * time.Millisecond
	const cycles, workers = 10000, 8
	var failed, lost, renewals atomic.Int64
	c := e.client(t, reentrant.Options{WatchdogTimeout: timeout, Hooks: reentrant.Hooks{
		Renewed: func(reentrant.Renewal) { renewals.Add(1) },
	}})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := w; i < cycles; i += workers {
				mu := c.Lock(fmt.Sprintf("zombie:%d", rng.IntN(64)))
				ctx, cancel := context.WithCancel(bg())
				if rng.IntN(2) == 0 {
					time.AfterFunc(time.Duration(rng.IntN(400))*time.Microsecond, cancel)
				}
				var held []context.Context
				at := ctx
				for d := 1 + rng.IntN(3); d > 0; d-- {
					h, err := mu.Lock(at, reentrant.WaitAtMost(time.Duration(rng.IntN(2000))*time.Microsecond))
					if err != nil {
						break
					}
					held = append(held, h)
					at = h
				}
				for j := len(held) - 1; j >= 0; j-- {
					err := mu.Unlock(held[j])
					switch {
					case errors.Is(err, reentrant.ErrLockLost) || errors.Is(context.Cause(held[j]), reentrant.ErrLockLost):
						// A stall past the timeout (a busy machine) may
						// lose a hold; the library said so. Not a zombie.
						lost.Add(1)
					case err != nil:
						failed.Add(1)
					}
				}
				cancel()
			}
		}(w)
	}
	waitAll(t, &wg, redistest.Within, func() {})
	assert.Zero(t, failed.Load(), "no Unlock failed but of holds the library reported lost")
	t.Logf("%d holds reported lost", lost.Load())
	// Acquires cut short with their reply lost may have left a hold in
	// Redis; nothing renews it, so it expires within the timeout.
	eventually(t, "every key to expire", func() bool {
		keys, err := e.do(t, "KEYS", "zombie:*").AsStrSlice()
		require.NoError(t, err)
		return len(keys) == 0
	})
	// Counted by the watchdog's hook, not by the server's script calls:
	// wake-ups passed on and undos of attempts cut short may still be
	// running in the background, and they are not renewals.
	before := renewals.Load()
	time.Sleep(2 * timeout) // six renewal periods
	assert.Equal(t, before, renewals.Load(), "no renewal runs once every lock is released")
}

// LeaseDeadline is the acquire's send time plus the TTL minus 10%; each
// renewal moves it forward; after a loss it stays where the hold ended.
func TestLeaseDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c, _ := fakeTimeClient(t, reentrant.Options{})
		start := time.Now()
		held, err := c.Lock("dl").Lock(bg())
		require.NoError(t, err)
		d, ok := reentrant.LeaseDeadline(held)
		require.True(t, ok)
		assert.Equal(t, 27*time.Second, d.Sub(start))
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		d, _ = reentrant.LeaseDeadline(held)
		assert.Equal(t, 37*time.Second, d.Sub(start), "moved by the renewal at 10s")
		m.Del("dl")
		<-held.Done()
		lostAt, _ := reentrant.LeaseDeadline(held)
		time.Sleep(time.Minute)
		after, _ := reentrant.LeaseDeadline(held)
		assert.Equal(t, lostAt, after)
		_, ok = reentrant.LeaseDeadline(bg())
		assert.False(t, ok)
	})
}

// An Unlock in the moment the watchdog lets a lost hold go, after the
// hold left the client's table but before its held context is cancelled
// (here: from the HoldEnded hook, which runs in between), says the lock
// was lost, as it does after: never "not held", which would tell the
// caller its release found nothing it had ever held.
func TestUnlockAsHoldIsLost(t *testing.T) {
	e := onRedis(t)
	var mu *reentrant.Lock
	var held atomic.Pointer[context.Context]
	unlocked := make(chan error, 1)
	c := e.client(t, reentrant.Options{WatchdogTimeout: time.Second, Hooks: reentrant.Hooks{
		HoldEnded: func(_ context.Context, end reentrant.HoldEnd) {
			if h := held.Load(); h != nil && errors.Is(end.Cause, reentrant.ErrLockLost) {
				unlocked <- mu.Unlock(*h)
			}
		},
	}})
	mu = c.Lock("lost-in-between")
	h, err := mu.Lock(bg())
	require.NoError(t, err)
	held.Store(&h)
	require.NoError(t, e.do(t, "DEL", "lost-in-between").Error())
	select {
	case err := <-unlocked:
		assert.ErrorIs(t, err, reentrant.ErrLockLost)
		assert.NotErrorIs(t, err, reentrant.ErrNotHeld)
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not find the hold gone")
	}
}
