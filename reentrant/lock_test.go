package reentrant_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// A lock on the wire is a hash name -> {"<uuid>:<n>": holds} with a 30000ms
// TTL; each re-entry adds one, each Unlock takes one off, and the last
// deletes the key and publishes "0" on redisson_lock__channel:{name}.
func TestReentrantDepth3(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		mu := c.Lock("order:42")
		msgs := e.subscribe(t, "redisson_lock__channel:{order:42}")

		ctx := bg()
		var held []context.Context
		for depth := 1; depth <= 3; depth++ {
			h, err := mu.Lock(ctx)
			require.NoError(t, err)
			held = append(held, h)
			ctx = h
			fields, err := e.do(t, "HGETALL", "order:42").AsStrMap()
			require.NoError(t, err)
			require.Len(t, fields, 1)
			for field, count := range fields {
				assert.Regexp(t, ownerField, field)
				owner, _ := reentrant.OwnerFrom(h)
				assert.Equal(t, owner.String(), field)
				assert.Equal(t, strconv.Itoa(depth), count)
			}
			n, err := mu.HoldCount(h)
			require.NoError(t, err)
			assert.Equal(t, depth, n)
		}
		ttl := e.int(t, "PTTL", "order:42")
		assert.InDelta(t, 30000, ttl, 1000, "default TTL is the 30s watchdog timeout")

		owner, _ := reentrant.OwnerFrom(ctx)
		for depth := 3; depth >= 1; depth-- {
			require.NoError(t, mu.Unlock(held[depth-1]))
			assert.ErrorIs(t, context.Cause(held[depth-1]), context.Canceled, "Unlock ends the newest held context")
			if depth > 1 {
				assert.NoError(t, held[depth-2].Err(), "outer held contexts live on")
			}
			n, err := mu.HoldCount(reentrant.WithOwner(bg(), owner))
			require.NoError(t, err)
			assert.Equal(t, depth-1, n)
		}
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "order:42"))
		// "0", or "00" where the release told a relock waiter directly:
		// Redisson reads either as the number 0 (LongCodec), its unlock.
		msg := receive(t, msgs)
		n, err := strconv.ParseInt(msg, 10, 64)
		assert.NoError(t, err, msg)
		assert.Zero(t, n, msg)
	})
}

// Re-entry resets the TTL to the lease; a release that leaves holds resets it
// too.
func TestReentryResetsTTL(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		mu := e.client(t).Lock("ttl")
		outer, err := mu.Lock(bg(), reentrant.LeaseFor(time.Minute))
		require.NoError(t, err)
		e.do(t, "PEXPIRE", "ttl", "5000")
		inner, err := mu.Lock(outer, reentrant.LeaseFor(time.Minute))
		require.NoError(t, err)
		assert.Greater(t, e.int(t, "PTTL", "ttl"), int64(50000))
		e.do(t, "PEXPIRE", "ttl", "5000")
		require.NoError(t, mu.Unlock(inner))
		assert.Greater(t, e.int(t, "PTTL", "ttl"), int64(50000))
		remain, err := mu.RemainTTL(outer)
		require.NoError(t, err)
		assert.Greater(t, remain, 50*time.Second)
		require.NoError(t, mu.Unlock(outer))
		remain, err = mu.RemainTTL(bg())
		require.NoError(t, err)
		assert.Zero(t, remain)
	})
}

// A hold that expired in Redis cannot be released: Unlock says it was lost,
// and the held context is cancelled with ErrLockLost.
func TestUnlockAfterExpiry(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		mu := e.client(t).Lock("expiring")
		ctx, err := mu.Lock(bg(), reentrant.LeaseFor(time.Hour))
		require.NoError(t, err)
		if e.mini != nil {
			e.mini.FastForward(2 * time.Hour)
		} else {
			e.do(t, "PEXPIRE", "expiring", "1")
			eventually(t, "the key to expire", func() bool { return e.int(t, "EXISTS", "expiring") == 0 })
		}
		err = mu.Unlock(ctx)
		assert.ErrorIs(t, err, reentrant.ErrLockLost)
		assert.ErrorIs(t, context.Cause(ctx), reentrant.ErrLockLost, "the Unlock that found it lost says so")
		assert.ErrorIs(t, mu.Unlock(ctx), reentrant.ErrLockLost, "nothing is left to release: the loss again, at once")
	})
}

// Another owner's Unlock is refused and changes nothing; so is a second
// Unlock of a single hold.
func TestNonOwnerUnlock(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		held, err := a.Lock("shared").Lock(bg())
		require.NoError(t, err)
		e.do(t, "PEXPIRE", "shared", "100000")
		before, err := e.do(t, "HGETALL", "shared").AsStrMap()
		require.NoError(t, err)

		// Another client, another owner of the same client, no owner at all.
		for _, ctx := range []context.Context{
			reentrant.WithOwner(bg(), b.NewOwner()),
			reentrant.WithOwner(bg(), a.NewOwner()),
			bg(),
		} {
			assert.ErrorIs(t, b.Lock("shared").Unlock(ctx), reentrant.ErrNotHeld)
			assert.ErrorIs(t, a.Lock("shared").Unlock(ctx), reentrant.ErrNotHeld)
		}
		after, err := e.do(t, "HGETALL", "shared").AsStrMap()
		require.NoError(t, err)
		assert.Equal(t, before, after)
		assert.Greater(t, e.int(t, "PTTL", "shared"), int64(90000), "TTL untouched")
		assert.NoError(t, held.Err(), "holder's context untouched")

		mu := a.Lock("shared")
		require.NoError(t, mu.Unlock(held))
		assert.ErrorIs(t, mu.Unlock(held), reentrant.ErrNotHeld, "double unlock")
	})
}

// ForceUnlock deletes whoever's lock and publishes "0"; names with "{" keep
// their own hash tag in the channel name.
func TestForceUnlockPublishes(t *testing.T) {
	for name, channel := range map[string]string{
		"plain":         "redisson_lock__channel:{plain}",
		"user:{7}:cart": "redisson_lock__channel:user:{7}:cart",
	} {
		t.Run(name, func(t *testing.T) {
			onBoth(t, func(t *testing.T, e env) {
				a, b := e.client(t), e.client(t)
				msgs := e.subscribe(t, channel)
				held, err := a.Lock(name).Lock(bg())
				require.NoError(t, err)
				ok, err := b.Lock(name).ForceUnlock(bg())
				require.NoError(t, err)
				assert.True(t, ok)
				assert.Equal(t, "0", receive(t, msgs))
				assert.Equal(t, int64(0), e.int(t, "EXISTS", name))
				ok, err = b.Lock(name).ForceUnlock(bg())
				require.NoError(t, err)
				assert.False(t, ok, "nothing to force")

				// The forcing client's own holds end at once.
				held2, err := b.Lock(name).Lock(bg())
				require.NoError(t, err)
				_, err = b.Lock(name).ForceUnlock(bg())
				require.NoError(t, err)
				assert.ErrorIs(t, context.Cause(held2), reentrant.ErrLockLost)
				assert.NoError(t, held.Err(), "another client learns of it from Redis, not from a local call")
			})
		})
	}
}

// A key of another type is not a lock: every operation says so with
// ErrWrongType and the value survives.
func TestWrongType(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		c := e.client(t)
		e.do(t, "SET", "str", "precious")
		mu := c.Lock("str")
		_, err := mu.Lock(bg())
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		_, _, err = mu.TryLock(bg())
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		// Polling, and a fenced lock: not "held by someone else".
		_, err = mu.Lock(bg(), reentrant.RetryDelay(10*time.Millisecond), reentrant.WaitAtMost(time.Second))
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		_, err = c.FencedLock("str").Lock(bg())
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		err = mu.Unlock(reentrant.WithOwner(bg(), c.NewOwner()))
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		_, err = mu.ForceUnlock(bg())
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		_, err = mu.HoldCount(reentrant.WithOwner(bg(), c.NewOwner()))
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		v, err := e.do(t, "GET", "str").ToString()
		require.NoError(t, err)
		assert.Equal(t, "precious", v)
	})
}

// SCRIPT FLUSH between calls: EVALSHA fails with NOSCRIPT and the script is
// sent again with EVAL, transparently.
func TestScriptFlushMidRun(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		mu := e.client(t).Lock("flushed")
		ctx, err := mu.Lock(bg())
		require.NoError(t, err)
		require.NoError(t, e.do(t, "SCRIPT", "FLUSH").Error())
		ctx, err = mu.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, e.do(t, "SCRIPT", "FLUSH").Error())
		require.NoError(t, mu.Unlock(ctx))
		require.NoError(t, e.do(t, "SCRIPT", "FLUSH").Error())
		require.NoError(t, mu.Unlock(ctx))
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "flushed"))
	})
}

// A restart without persistence loses every lock and every loaded script.
// The client reconnects, the old holder learns of the loss at Unlock, and the
// lock can be taken again.
func TestRedisRestartMidRun(t *testing.T) {
	e := onRedis(t)
	mu := e.client(t).Lock("restarted")
	held, err := mu.Lock(bg())
	require.NoError(t, err)
	e.server.Restart()

	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	var again context.Context
	eventually(t, "a lock after the restart", func() bool {
		again, err = mu.Lock(ctx)
		return err == nil
	})
	assert.ErrorIs(t, mu.Unlock(held), reentrant.ErrLockLost)
	require.NoError(t, mu.Unlock(again))
}

// A wait cut short by its ctx returns promptly with the ctx's error and
// cause, and leaves the lock to its holder.
func TestCancelWhileWaiting(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		holder, waiter := e.client(t), e.client(t)
		held, err := holder.Lock("busy").Lock(bg())
		require.NoError(t, err)

		stop := errors.New("caller gave up")
		ctx, cancel := context.WithCancelCause(bg())
		result := make(chan error, 1)
		go func() {
			_, err := waiter.Lock("busy").Lock(ctx)
			result <- err
		}()
		// Let the waiter reach its wait; cancelling earlier must work too.
		time.Sleep(50 * time.Millisecond)
		cancel(stop)
		cancelled := time.Now()
		select {
		case err = <-result:
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled wait did not return")
		}
		t.Logf("returned %v after cancel", time.Since(cancelled))
		assert.Less(t, time.Since(cancelled), 500*time.Millisecond)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, stop)
		assert.NoError(t, held.Err())
		n, err := holder.Lock("busy").HoldCount(held)
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		// Deadlines give DeadlineExceeded the same way.
		dctx, dcancel := context.WithTimeout(bg(), 20*time.Millisecond)
		defer dcancel()
		_, err = waiter.Lock("busy").Lock(dctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// 16 goroutines with their own owners on two clients take one lock in turn.
// Each sets an in-section flag with compare-and-swap on entry; finding it
// already set would mean two holders at once.
func TestMutualExclusion(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		clients := []*reentrant.Client{e.client(t), e.client(t)}
		const workers, rounds = 16, 25
		var inside atomic.Bool
		var overlaps, entries atomic.Int64
		shared := 0 // read-modify-written only under the lock
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(mu *reentrant.Lock) {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					ctx, err := mu.Lock(bg())
					if !assert.NoError(t, err) {
						return
					}
					if !inside.CompareAndSwap(false, true) {
						overlaps.Add(1)
					}
					entries.Add(1)
					v := shared
					time.Sleep(100 * time.Microsecond)
					shared = v + 1
					inside.Store(false)
					assert.NoError(t, mu.Unlock(ctx))
				}
			}(clients[w%2].Lock("mutex"))
		}
		waitAll(t, &wg, redistest.Within, func() {})
		assert.Zero(t, overlaps.Load(), "two holders inside at once")
		assert.Equal(t, int64(workers*rounds), entries.Load())
		assert.Equal(t, workers*rounds, shared)
	})
}

// Invalid arguments are refused before anything reaches Redis.
func TestInvalidArguments(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	cases := map[string]func() error{
		"empty name":        func() error { _, err := c.Lock("").Lock(bg()); return err },
		"empty name try":    func() error { _, _, err := c.Lock("").TryLock(bg()); return err },
		"empty name unlock": func() error { return c.Lock("").Unlock(bg()) },
		"zero lease":        func() error { _, err := c.Lock("x").Lock(bg(), reentrant.LeaseFor(0)); return err },
		"negative lease":    func() error { _, err := c.Lock("x").Lock(bg(), reentrant.LeaseFor(-time.Second)); return err },
		"sub-ms lease":      func() error { _, err := c.Lock("x").Lock(bg(), reentrant.LeaseFor(time.Microsecond)); return err },
		"negative wait":     func() error { _, _, err := c.Lock("x").TryLock(bg(), reentrant.WaitAtMost(-1)); return err },
		"negative retries":  func() error { _, _, err := c.Lock("x").TryLock(bg(), reentrant.RetryCount(-1)); return err },
		"zero retry delay":  func() error { _, _, err := c.Lock("x").TryLock(bg(), reentrant.RetryDelay(0)); return err },
		"bad owner":         func() error { _, err := reentrant.ParseOwner("thread-1"); return err },
		"upper-case owner":  func() error { _, err := reentrant.ParseOwner("6BA7B810-9DAD-11D1-80B4-00C04FD430C8:1"); return err },
		"owner without n":   func() error { _, err := reentrant.ParseOwner("6ba7b810-9dad-11d1-80b4-00c04fd430c8:"); return err },
		"nil client":        func() error { _, err := reentrant.New(nil, reentrant.Options{}); return err },
		"zero owner": func() error {
			_, err := c.Lock("x").Lock(reentrant.WithOwner(bg(), reentrant.Owner{}))
			return err
		},
		"zero owner unlock": func() error { return c.Lock("x").Unlock(reentrant.WithOwner(bg(), reentrant.Owner{})) },
		"tiny watchdog": func() error {
			_, err := reentrant.New(e.admin, reentrant.Options{WatchdogTimeout: time.Millisecond})
			return err
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) { assert.ErrorIs(t, f(), reentrant.ErrInvalidArgument) })
	}
	assert.Empty(t, e.mini.Keys(), "nothing reached Redis")
}

func TestOwnerRoundTrip(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	o := c.NewOwner()
	assert.Regexp(t, ownerField, o.String())
	assert.Contains(t, o.String(), c.ID())
	back, err := reentrant.ParseOwner(o.String())
	require.NoError(t, err)
	assert.Equal(t, o, back)
	assert.NotEqual(t, o, c.NewOwner())
	_, ok := reentrant.OwnerFrom(bg())
	assert.False(t, ok)
}

// An owner handed to another client (another process) re-enters and
// releases the same hold.
func TestOwnerHandOff(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		held, err := a.Lock("job").Lock(bg())
		require.NoError(t, err)
		owner, _ := reentrant.OwnerFrom(held)
		wire := owner.String()

		parsed, err := reentrant.ParseOwner(wire)
		require.NoError(t, err)
		there := reentrant.WithOwner(bg(), parsed)
		there, ok, err := b.Lock("job").TryLock(there)
		require.NoError(t, err)
		require.True(t, ok, "same owner re-enters from another client")
		n, _ := b.Lock("job").HoldCount(there)
		assert.Equal(t, 2, n)
		require.NoError(t, b.Lock("job").Unlock(there))
		require.NoError(t, a.Lock("job").Unlock(held))
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "job"))
	})
}

// WithoutOwner on a held context gives a context for a new owner that
// carries nothing of the hold: no owner, token or lease deadline, and no
// cancellation when the hold ends, whether a plain, re-entered or
// MultiLock hold; it ends with the context the caller gave to Lock, and
// has its deadline, and keeps the caller's other values.
func TestWithoutOwnerOutlivesHold(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	type reqKey struct{}
	type laterKey struct{}
	caller, stop := context.WithCancelCause(context.WithValue(bg(), reqKey{}, "request"))
	caller, cancelDeadline := context.WithDeadline(caller, time.Now().Add(time.Hour))
	defer cancelDeadline()

	f := c.FencedLock("fenced")
	outer, err := f.Lock(caller)
	require.NoError(t, err)
	inner, err := f.Lock(outer) // a re-entry
	require.NoError(t, err)
	m := reentrant.NewMultiLock(c.Lock("m1"), c.Lock("m2"))
	multi, err := m.Lock(caller)
	require.NoError(t, err)
	free := map[string]context.Context{
		"held":     reentrant.WithoutOwner(outer),
		"re-entry": reentrant.WithoutOwner(inner),
		"derived":  reentrant.WithoutOwner(context.WithValue(inner, laterKey{}, "later")),
		"multi":    reentrant.WithoutOwner(multi),
	}
	require.NoError(t, f.Unlock(inner))
	require.NoError(t, f.Unlock(outer))
	require.NoError(t, m.Unlock(multi))
	require.Error(t, outer.Err(), "the hold ended")
	want, _ := caller.Deadline()
	for name, ctx := range free {
		assert.NoError(t, ctx.Err(), name)
		assert.NoError(t, context.Cause(ctx), name)
		_, ok := reentrant.OwnerFrom(ctx)
		assert.False(t, ok, "%s: no owner", name)
		_, ok = reentrant.TokenFrom(ctx)
		assert.False(t, ok, "%s: no token", name)
		_, ok = reentrant.LeaseDeadline(ctx)
		assert.False(t, ok, "%s: no lease", name)
		assert.Equal(t, "request", ctx.Value(reqKey{}), name)
		d, ok := ctx.Deadline()
		assert.True(t, ok && d.Equal(want), "%s: the caller's deadline", name)
	}
	assert.Equal(t, "later", free["derived"].Value(laterKey{}))

	// A new owner: it takes the lock, then ends with the caller.
	again, err := f.Lock(free["re-entry"])
	require.NoError(t, err)
	o, _ := reentrant.OwnerFrom(again)
	first, _ := reentrant.OwnerFrom(outer)
	assert.NotEqual(t, first, o)
	require.NoError(t, f.Unlock(again))
	stop(errors.New("request over"))
	for name, ctx := range free {
		recv(t, ctx.Done())
		assert.ErrorIs(t, ctx.Err(), context.Canceled, name)
	}

	assert.Nil(t, reentrant.WithoutOwner(nil))
	_, err = f.Lock(reentrant.WithoutOwner(nil))
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}

func TestTryLockLimits(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		_, err := a.Lock("t").Lock(bg())
		require.NoError(t, err)
		ctx, ok, err := b.Lock("t").TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok)
		assert.NotNil(t, ctx)

		start := time.Now()
		_, ok, err = b.Lock("t").TryLock(bg(), reentrant.WaitAtMost(50*time.Millisecond))
		require.NoError(t, err)
		assert.False(t, ok)
		assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

		_, ok, err = b.Lock("t").TryLock(bg(), reentrant.WaitAtMost(time.Hour), reentrant.RetryCount(3), reentrant.RetryDelay(time.Millisecond))
		require.NoError(t, err)
		assert.False(t, ok)

		_, err = b.Lock("t").Lock(bg(), reentrant.NoWait())
		assert.ErrorIs(t, err, reentrant.ErrNotAcquired)
	})
}

func TestUseAfterClose(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	held, err := c.Lock("c").Lock(bg())
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	assert.ErrorIs(t, context.Cause(held), reentrant.ErrClosed)
	for name, f := range map[string]func() error{
		"lock":   func() error { _, err := c.Lock("c").Lock(bg()); return err },
		"unlock": func() error { return c.Lock("c").Unlock(held) },
		"force":  func() error { _, err := c.Lock("c").ForceUnlock(bg()); return err },
		"locked": func() error { _, err := c.Lock("c").IsLocked(bg()); return err },
		"ttl":    func() error { _, err := c.Lock("c").RemainTTL(bg()); return err },
	} {
		err := f()
		assert.ErrorIs(t, err, reentrant.ErrClosed, name)
		assert.True(t, strings.HasPrefix(err.Error(), "relock: "), "%s: %q", name, err)
	}
	assert.True(t, strings.HasPrefix(context.Cause(held).Error(), "relock: "), "%q", context.Cause(held))
}

// Every kind's release checks its owner, as the plain lock's does: an
// Unlock by another client's owner, by another owner of the holder's
// client, or with no owner, is ErrNotHeld and changes nothing; the holder
// then releases as usual.
func TestNonOwnerUnlockEveryKind(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		for kind, lock := range map[string]func(c *reentrant.Client) *reentrant.Lock{
			"fair":          func(c *reentrant.Client) *reentrant.Lock { return c.FairLock("k-fair") },
			"priority":      func(c *reentrant.Client) *reentrant.Lock { return c.PriorityLock("k-prio") },
			"group":         func(c *reentrant.Client) *reentrant.Lock { return c.GroupLock("k-group", "x", "y") },
			"fenced":        func(c *reentrant.Client) *reentrant.Lock { return c.FencedLock("k-fenced") },
			"non-reentrant": func(c *reentrant.Client) *reentrant.Lock { return c.NonReentrantLock("k-nr") },
		} {
			t.Run(kind, func(t *testing.T) {
				held, err := lock(a).Lock(bg())
				require.NoError(t, err)
				before := e.snapshot(t)
				for _, ctx := range []context.Context{
					reentrant.WithOwner(bg(), b.NewOwner()),
					reentrant.WithOwner(bg(), a.NewOwner()),
					bg(),
				} {
					assert.ErrorIs(t, lock(b).Unlock(ctx), reentrant.ErrNotHeld)
					assert.ErrorIs(t, lock(a).Unlock(ctx), reentrant.ErrNotHeld)
				}
				assert.Equal(t, before, e.snapshot(t), "nothing changed")
				assert.NoError(t, held.Err(), "the holder's context untouched")
				require.NoError(t, lock(a).Unlock(held))
			})
		}
	})
}
