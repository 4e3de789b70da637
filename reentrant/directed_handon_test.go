package reentrant_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
)

// grantsKey is the hash of a plain lock's handoff offers.
func grantsKey(name string) string { return "relock_grants:{" + name + "}" }

// offerOf waits until client c's offer for lock name is recorded, and
// returns its owner number.
func offerOf(t *testing.T, e env, c *reentrant.Client, name string) string {
	t.Helper()
	var n string
	eventually(t, "the waiter's offer", func() bool {
		rec, err := e.do(t, "HGET", grantsKey(name), c.ID()).ToString()
		if err != nil {
			return false
		}
		n, _, _ = strings.Cut(rec, ":")
		return !strings.HasSuffix(rec, ":0")
	})
	return n
}

// grantSilently takes lock name from its holder, as an operator's
// forceUnlock would, and gives it to client's offer n as a release would
// (see handOn in scripts/wakelib.lua), but publishes nothing: the messages
// lost.
func grantSilently(t *testing.T, e env, name, client, n string) {
	t.Helper()
	require.NoError(t, e.do(t, "EVAL", `
redis.call('del', KEYS[1])
redis.call('hset', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 1)
redis.call('pexpire', KEYS[1], 30000)
redis.call('hset', KEYS[2], ARGV[1], ARGV[2] .. ':0')
return 1`, "2", name, grantsKey(name), client, n).Error())
}

// acquired is what a Lock run in the background returned.
type acquired struct {
	held context.Context
	err  error
}

// lockInBackground runs l.Lock(ctx) in a goroutine, and returns where its
// result comes.
func lockInBackground(ctx context.Context, l *reentrant.Lock) <-chan acquired {
	got := make(chan acquired, 1)
	go func() {
		h, err := l.Lock(ctx)
		got <- acquired{h, err}
	}()
	return got
}

// A relock release hands the lock to the relock client waiting: the
// waiter's wait ends on the release's message, and it holds the lock as
// the owner its client offered (a waiter that took the lock by its own
// attempt would hold it as the owner made for its call).
func TestPlainReleaseHandsOn(t *testing.T) {
	e := onRedis(t)
	a, b := e.patient(t), e.patient(t)
	const name = "handon"
	held, err := a.Lock(name).Lock(bg())
	require.NoError(t, err)

	got := lockInBackground(bg(), b.Lock(name))
	n := offerOf(t, e, b, name)
	eventually(t, "the waiter to listen", func() bool { return e.numsub(t, wakeChannel(b, name)) == 1 })
	require.NoError(t, a.Lock(name).Unlock(held))
	r := recv(t, got)
	require.NoError(t, r.err)
	h := r.held
	owner, ok := reentrant.OwnerFrom(h)
	require.True(t, ok)
	assert.Equal(t, b.ID()+":"+n, owner.String(), "the lock is held as the offer's owner")
	assert.Equal(t, int64(1), e.int(t, "HEXISTS", name, owner.String()))

	again, err := b.Lock(name).Lock(h) // re-entry, as the offer's owner
	require.NoError(t, err)
	require.NoError(t, b.Lock(name).Unlock(again))
	require.NoError(t, b.Lock(name).Unlock(h))
	assert.Equal(t, int64(0), e.int(t, "EXISTS", name))
	assert.Equal(t, int64(0), e.int(t, "EXISTS", waitersKey(name)), "its release dropped the client, which had no waiter left")
	assert.Equal(t, int64(0), e.int(t, "EXISTS", grantsKey(name)), "and its offer")
}

// A handoff whose message is lost (a dropped connection) is taken by the
// waiter's next attempt, which finds the lock held by its client's offer.
func TestPlainLostHandoffClaimed(t *testing.T) {
	e := onRedis(t)
	a := e.patient(t)
	b := e.client(t, reentrant.Options{RepollInterval: 100 * time.Millisecond})
	const name = "handon-lost"
	held, err := a.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	got := lockInBackground(bg(), b.Lock(name))
	n := offerOf(t, e, b, name)
	grantSilently(t, e, name, b.ID(), n)
	var h context.Context
	select {
	case r := <-got:
		require.NoError(t, r.err)
		h = r.held
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not take the lock its client was given")
	}
	owner, _ := reentrant.OwnerFrom(h)
	assert.Equal(t, b.ID()+":"+n, owner.String())
	require.NoError(t, b.Lock(name).Unlock(h))
	assert.Equal(t, int64(0), e.int(t, "EXISTS", name))
	assert.ErrorIs(t, a.Lock(name).Unlock(held), reentrant.ErrLockLost)
}

// A waiter that gives up takes its client's offer back: a lock given to it
// meanwhile, whose message nobody heard, is released at once, not left to
// its TTL. So does Close, for a waiter still waiting.
func TestPlainHandoffGivenBack(t *testing.T) {
	for _, how := range []string{"gives up", "Close"} {
		t.Run(how, func(t *testing.T) {
			e := onRedis(t)
			var logs syncBuffer
			a := e.patient(t)
			b := e.client(t, reentrant.Options{RepollInterval: time.Minute,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			name := "handon-back-" + strings.ReplaceAll(how, " ", "-")
			_, err := a.Lock(name).Lock(bg(), reentrant.LeaseFor(time.Minute))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(bg())
			defer cancel()
			done := lockInBackground(ctx, b.Lock(name))
			n := offerOf(t, e, b, name)
			grantSilently(t, e, name, b.ID(), n)
			if how == "Close" {
				require.NoError(t, b.Close())
				if !assert.Equal(t, int64(0), e.int(t, "EXISTS", name), "given back by Close") {
					lock, _ := e.do(t, "HGETALL", name).AsStrMap()
					offers, _ := e.do(t, "HGETALL", grantsKey(name)).AsStrMap()
					t.Logf("lock %v, offers %v, offer %s, client %s", lock, offers, n, b.ID())
					time.Sleep(100 * time.Millisecond)
					t.Logf("100ms later: %d; logs:\n%s", e.int(t, "EXISTS", name), logs.String())
				}
				assert.ErrorIs(t, (recv(t, done)).err, reentrant.ErrClosed)
				return
			}
			cancel()
			assert.ErrorIs(t, (recv(t, done)).err, context.Canceled)
			eventually(t, "the lock given back", func() bool { return e.int(t, "EXISTS", name) == 0 })
		})
	}
}

// A wait that does not take handoffs (a lease of its own) gives a handoff
// that reaches it back, and the lock goes on: both of the client's waiters
// get it, without waiting out a TTL or a re-poll.
func TestPlainHandoffToWaitThatTakesNone(t *testing.T) {
	e := onRedis(t)
	a, b := e.patient(t), e.patient(t)
	const name = "handon-lease"
	held, err := a.Lock(name).Lock(bg())
	require.NoError(t, err)
	var wg sync.WaitGroup
	var through atomic.Int64
	wait := func(opts ...reentrant.LockOption) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := b.Lock(name).Lock(bg(), append(opts, reentrant.WaitAtMost(20*time.Second))...)
			if assert.NoError(t, err) {
				through.Add(1)
				assert.NoError(t, b.Lock(name).Unlock(h))
			}
		}()
	}
	wait(reentrant.LeaseFor(time.Minute)) // first in the client's queue
	eventually(t, "the first waiter to listen", func() bool { return e.numsub(t, wakeChannel(b, name)) == 1 })
	wait()
	offerOf(t, e, b, name)
	require.NoError(t, a.Lock(name).Unlock(held))
	waitAll(t, &wg, 20*time.Second, func() {})
	assert.Equal(t, int64(2), through.Load())
}

// Handoffs never starve a Java waiter: while relock clients keep the lock
// busy, each always with a waiter, a Redisson waiter still gets it. A
// release hands the lock on only when no one but registered relock
// clients heard its message on Redisson's channel; a Java waiter there
// makes it wake, as Redisson's protocol does, and the Java waiter's
// attempt races the woken relock waiter's. With every release handing the
// lock on, the Java waiter never gets it.
func TestPlainHandoffsLetJavaIn(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	const name = "handon-java"
	ctx, stop := context.WithCancel(bg())
	defer stop()
	var wg sync.WaitGroup
	var rounds atomic.Int64
	for _, c := range []*reentrant.Client{e.patient(t), e.patient(t)} {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					h, err := c.Lock(name).Lock(ctx)
					if err != nil {
						return
					}
					rounds.Add(1)
					time.Sleep(time.Millisecond) // the work
					assert.NoError(t, c.Lock(name).Unlock(h))
					// Work outside the lock: a goroutine that takes the lock
					// again at once would beat any waiter, relock's or Java's,
					// as in Redisson, which is not fair.
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	eventually(t, "relock contention", func() bool { return rounds.Load() > 50 })
	jctx, cancel := context.WithTimeout(bg(), time.Minute)
	defer cancel()
	before := rounds.Load()
	require.NoError(t, java.Lock(jctx, name, 1), "the Java waiter got the lock")
	t.Logf("the Java waiter got in after %d relock acquisitions", rounds.Load()-before)
	_, err := java.Unlock(bg(), name, 1)
	require.NoError(t, err)
	stop()
	waitAll(t, &wg, 20*time.Second, func() {})
}
