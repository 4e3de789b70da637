package reentrant_test

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// Misuse gets a clear error or a documented behaviour: never a panic, and
// never a change to another owner's lock, checked after every case.
func TestMisuse(t *testing.T) {
	e := onRedis(t)
	foreignClient := e.client(t)
	foreign, err := foreignClient.Lock("foreign").Lock(bg())
	require.NoError(t, err)
	e.do(t, "PEXPIRE", "foreign", "600000")
	before, err := e.do(t, "HGETALL", "foreign").AsStrMap()
	require.NoError(t, err)

	cases := []struct {
		name string
		run  func(t *testing.T, c *reentrant.Client)
	}{
		{"empty name", func(t *testing.T, c *reentrant.Client) {
			_, err := c.Lock("").Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		}},
		{"1 MiB name works", func(t *testing.T, c *reentrant.Client) {
			mu := c.Lock(strings.Repeat("n", 1<<20))
			held, err := mu.Lock(bg())
			require.NoError(t, err)
			require.NoError(t, mu.Unlock(held))
		}},
		{"binary name works", func(t *testing.T, c *reentrant.Client) {
			mu := c.Lock("\x00\xff{\x01}\n")
			held, err := mu.Lock(bg())
			require.NoError(t, err)
			n, err := mu.HoldCount(held)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			require.NoError(t, mu.Unlock(held))
		}},
		{"key of another type", func(t *testing.T, c *reentrant.Client) {
			e.do(t, "LPUSH", "a-list", "x")
			_, err := c.Lock("a-list").Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrWrongType)
			_, err = c.FairLock("a-list").Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrWrongType)
			_, err = c.ReadWriteLock("a-list").ReadLock().Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrWrongType)
			assert.Equal(t, int64(1), e.int(t, "LLEN", "a-list"))
		}},
		{"two waits are refused, not one silently winning", func(t *testing.T, c *reentrant.Client) {
			for _, opts := range [][]reentrant.LockOption{{reentrant.NoWait(), reentrant.WaitAtMost(time.Second)},
				{reentrant.WaitAtMost(time.Second), reentrant.NoWait()}, {reentrant.WaitAtMost(time.Second), reentrant.WaitAtMost(time.Minute)}} {
				_, _, err := c.Lock("d").TryLock(bg(), opts...)
				assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
				assert.ErrorContains(t, err, "give one")
			}
		}},
		{"Priority on another kind names it once", func(t *testing.T, c *reentrant.Client) {
			_, err := c.Lock("d").Lock(bg(), reentrant.Priority(3))
			assert.EqualError(t, err, "relock: invalid argument: Priority(3) is for a PriorityLock, not a lock")
			_, err = c.FairLock("d").Lock(bg(), reentrant.Priority(3))
			assert.ErrorContains(t, err, "not a fair lock")
			_, err = c.PermitExpirableSemaphore("d").Acquire(bg(), reentrant.Priority(3))
			assert.ErrorContains(t, err, "not a permit-expirable semaphore")
		}},
		{"New on a closed rueidis client", func(t *testing.T, _ *reentrant.Client) {
			rdb := e.rdb(t)
			rdb.Close()
			_, err := reentrant.New(rdb, reentrant.Options{})
			assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
			assert.ErrorIs(t, err, rueidis.ErrClosing)
		}},
		{"zero and negative durations", func(t *testing.T, c *reentrant.Client) {
			for _, o := range []reentrant.LockOption{reentrant.LeaseFor(0), reentrant.LeaseFor(-time.Second),
				reentrant.WaitAtMost(-1), reentrant.RetryDelay(0), reentrant.RetryDelay(-1), reentrant.RetryCount(-1)} {
				_, err := c.Lock("d").Lock(bg(), o)
				assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
			}
			for _, o := range []reentrant.Options{{WatchdogTimeout: -1}, {RepollInterval: -1}, {RenewBatchSize: -1},
				{FairWaitTimeout: time.Millisecond}, {ReplicaSync: reentrant.ReplicaSync{Replicas: -2}},
				{ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: -time.Second}},
				{ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: time.Microsecond}}} {
				_, err := reentrant.New(e.admin, o)
				assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
			}
		}},
		{"overflowing durations work", func(t *testing.T, c *reentrant.Client) {
			mu := c.Lock("long")
			held, ok, err := mu.TryLock(bg(), reentrant.LeaseFor(math.MaxInt64), reentrant.WaitAtMost(math.MaxInt64))
			require.NoError(t, err)
			require.True(t, ok)
			ttl, err := mu.RemainTTL(held)
			require.NoError(t, err)
			assert.Greater(t, ttl, 100*365*24*time.Hour, "a 292-year lease")
			require.NoError(t, mu.Unlock(held))
			huge, err := reentrant.New(e.admin, reentrant.Options{WatchdogTimeout: math.MaxInt64})
			require.NoError(t, err)
			require.NoError(t, huge.Close())
		}},
		{"lease shorter than the renewal interval just ends", func(t *testing.T, c *reentrant.Client) {
			held, err := c.Lock("short").Lock(bg(), reentrant.LeaseFor(5*time.Millisecond))
			require.NoError(t, err)
			<-held.Done()
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrLeaseEnded)
			eventually(t, "the key to expire", func() bool { return e.int(t, "EXISTS", "short") == 0 })
		}},
		{"unlock without lock", func(t *testing.T, c *reentrant.Client) {
			assert.ErrorIs(t, c.Lock("foreign").Unlock(bg()), reentrant.ErrNotHeld)
			assert.ErrorIs(t, c.Lock("foreign").Unlock(reentrant.WithOwner(bg(), c.NewOwner())), reentrant.ErrNotHeld)
			assert.ErrorIs(t, c.ReadWriteLock("foreign").WriteLock().Unlock(reentrant.WithOwner(bg(), c.NewOwner())), reentrant.ErrNotHeld)
			assert.ErrorIs(t, c.FairLock("foreign").Unlock(reentrant.WithOwner(bg(), c.NewOwner())), reentrant.ErrNotHeld)
			assert.ErrorIs(t, reentrant.NewMultiLock(c.Lock("foreign")).Unlock(bg()), reentrant.ErrNotHeld)
			assert.ErrorIs(t, reentrant.NewRedlock(c.Lock("foreign")).Unlock(bg()), reentrant.ErrNotHeld)
		}},
		{"empty multi-lock and Redlock", func(t *testing.T, c *reentrant.Client) {
			_, err := reentrant.NewMultiLock().Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
			_, err = reentrant.NewRedlock().Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
		}},
		{"use after Close", func(t *testing.T, c *reentrant.Client) {
			closed := e.client(t)
			require.NoError(t, closed.Close())
			_, err := closed.Lock("foreign").Lock(bg())
			assert.ErrorIs(t, err, reentrant.ErrClosed)
			_, err = closed.Lock("foreign").ForceUnlock(bg())
			assert.ErrorIs(t, err, reentrant.ErrClosed)
		}},
		{"one owner from many goroutines at once", func(t *testing.T, c *reentrant.Client) {
			// One owner is one holder: its goroutines re-enter each other's
			// hold; the count in Redis stays exact.
			ctx := reentrant.WithOwner(bg(), c.NewOwner())
			mu := c.Lock("shared-owner")
			var wg sync.WaitGroup
			for g := 0; g < 20; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < 10; r++ {
						held, err := mu.Lock(ctx, reentrant.NoWait())
						if assert.NoError(t, err) {
							assert.NoError(t, mu.Unlock(held))
						}
					}
				}()
			}
			wg.Wait()
			n, err := mu.HoldCount(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
			assert.Equal(t, int64(0), e.int(t, "EXISTS", "shared-owner"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.client(t)
			assert.NotPanics(t, func() { tc.run(t, c) })
			after, err := e.do(t, "HGETALL", "foreign").AsStrMap()
			require.NoError(t, err)
			assert.Equal(t, before, after, "the foreign lock is untouched")
			assert.Greater(t, e.int(t, "PTTL", "foreign"), int64(500000), "its TTL untouched")
			assert.NoError(t, foreign.Err())
		})
	}
}

// logs is a slog handler that keeps what it is given.
type logs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// at returns the messages logged at level or above.
func (l *logs) at(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if r.Level >= level {
			out = append(out, r.Message)
		}
	}
	return out
}

// The traps a new user falls into each end in a clear answer.
func TestMisuseTraps(t *testing.T) {
	e := onRedis(t)
	log := &logs{}
	c := e.client(t, reentrant.Options{Logger: slog.New(log)})

	t.Run("unlock with the context given to Lock", func(t *testing.T) {
		type requestKey struct{}
		ctx := context.WithValue(bg(), requestKey{}, "request") // a caller's own context
		held, err := c.Lock("trap").Lock(ctx)
		require.NoError(t, err)
		err = c.Lock("trap").Unlock(ctx)
		assert.ErrorIs(t, err, reentrant.ErrNotHeld)
		assert.ErrorContains(t, err, "pass the one Lock returned")
		assert.Contains(t, log.at(slog.LevelError), "relock: Unlock was given the context passed to Lock, not the one Lock returned; the lock stays held")
		require.NoError(t, c.Lock("trap").Unlock(held))
	})
	t.Run("a lease that runs out is not a warning", func(t *testing.T) {
		before := len(log.at(slog.LevelWarn))
		held, err := c.Lock("leased").Lock(bg(), reentrant.LeaseFor(50*time.Millisecond))
		require.NoError(t, err)
		recv(t, held.Done())
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrLeaseEnded)
		assert.Len(t, log.at(slog.LevelWarn), before, "nothing logged at WARN or above")
	})
	t.Run("IsLocked on a key that is not a lock", func(t *testing.T) {
		e.do(t, "SET", "a-string", "v")
		_, err := c.Lock("a-string").IsLocked(bg())
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		_, err = c.Lock("a-string").RemainTTL(bg())
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
	})
	t.Run("a semaphore on a key that is not one", func(t *testing.T) {
		e.do(t, "HSET", "a-hash", "f", "1")
		err := c.Semaphore("a-hash").Release(bg(), 1)
		assert.ErrorIs(t, err, reentrant.ErrWrongType)
		assert.NotContains(t, err.Error(), "not a lock")
	})
	t.Run("a multi-lock released through another handle", func(t *testing.T) {
		held, err := reentrant.NewMultiLock(c.Lock("m1"), c.Lock("m2")).Lock(bg())
		require.NoError(t, err)
		require.NoError(t, reentrant.NewMultiLock(c.Lock("m1"), c.Lock("m2")).Unlock(held))
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "m1", "m2"))
		held, err = reentrant.NewMultiLock(c.Lock("m1"), c.Lock("m2")).Lock(bg())
		require.NoError(t, err)
		assert.ErrorIs(t, reentrant.NewMultiLock(c.Lock("m2"), c.Lock("m3")).Unlock(held), reentrant.ErrNotHeld, "other locks")
		require.NoError(t, reentrant.NewMultiLock(c.Lock("m1"), c.Lock("m2")).Unlock(held))
	})
	t.Run("errors say relock once", func(t *testing.T) {
		held, err := c.Lock("once").Lock(bg())
		require.NoError(t, err)
		_, err = c.Lock("once").Lock(bg(), reentrant.NoWait())
		var nilOpt reentrant.LockOption
		_, err2 := c.Lock("once").Lock(bg(), nilOpt)
		e.do(t, "LPUSH", "once-list", "x")
		_, err3 := c.FairLock("once-list").Lock(bg())
		assert.ErrorIs(t, err3, reentrant.ErrWrongType)
		for _, err := range []error{err, err2, err3, c.Lock("once").Unlock(bg()), c.Lock("").Unlock(bg())} {
			require.Error(t, err)
			assert.Equal(t, 1, strings.Count(err.Error(), "relock:"), "%q", err.Error())
			assert.True(t, strings.HasPrefix(err.Error(), "relock: "), "%q", err.Error())
			assert.NotContains(t, err.Error(), "user_script", "no script hash in the message")
		}
		require.NoError(t, c.Lock("once").Unlock(held))
	})
	t.Run("a goroutine as a new owner", func(t *testing.T) {
		held, err := c.Lock("job").Lock(bg())
		require.NoError(t, err)
		done := make(chan bool)
		go func() {
			// Given held itself, this would re-enter the caller's hold.
			_, ok, err := c.Lock("job").TryLock(reentrant.WithoutOwner(held))
			assert.NoError(t, err)
			done <- ok
		}()
		assert.False(t, recv(t, done), "a new owner waits like anyone else")
		require.NoError(t, c.Lock("job").Unlock(held))
	})
}
