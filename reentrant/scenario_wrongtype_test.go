package reentrant_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// syncMethod is one synchronizer method, called on name.
type syncMethod struct {
	kind, name string
	call       func(ctx context.Context, c *reentrant.Client, name string) error
}

// anID is a permit id nobody holds.
const anID = "0123456789abcdef0123456789abcdef"

// syncMethods is every method of every synchronizer that reads or changes
// its keys (Permit.Release needs a permit, which a key of another type
// never gives).
var syncMethods = []syncMethod{
	{"latch", "TrySetCount", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.CountDownLatch(n).TrySetCount(ctx, 2)
		return err
	}},
	{"latch", "CountDown", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.CountDownLatch(n).CountDown(ctx)
	}},
	{"latch", "Count", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.CountDownLatch(n).Count(ctx)
		return err
	}},
	{"latch", "Delete", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.CountDownLatch(n).Delete(ctx)
		return err
	}},
	{"latch", "Await", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.CountDownLatch(n).Await(ctx)
	}},
	{"semaphore", "Acquire", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.Semaphore(n).Acquire(ctx, 1)
	}},
	{"semaphore", "TryAcquire", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.Semaphore(n).TryAcquire(ctx, 1)
		return err
	}},
	{"semaphore", "Release", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.Semaphore(n).Release(ctx, 1)
	}},
	{"semaphore", "ReleaseIfExists", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.Semaphore(n).ReleaseIfExists(ctx, 1)
		return err
	}},
	{"semaphore", "TrySetPermits", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.Semaphore(n).TrySetPermits(ctx, 1)
		return err
	}},
	{"semaphore", "TrySetPermitsFor", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.Semaphore(n).TrySetPermitsFor(ctx, 1, time.Minute)
		return err
	}},
	{"semaphore", "AddPermits", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.Semaphore(n).AddPermits(ctx, 1)
	}},
	{"semaphore", "Available", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.Semaphore(n).Available(ctx)
		return err
	}},
	{"semaphore", "Drain", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.Semaphore(n).Drain(ctx)
		return err
	}},
	{"permits", "Acquire", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.PermitExpirableSemaphore(n).Acquire(ctx)
		return err
	}},
	{"permits", "TryAcquireN", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, _, err := c.PermitExpirableSemaphore(n).TryAcquireN(ctx, 2)
		return err
	}},
	{"permits", "Release", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.PermitExpirableSemaphore(n).Release(ctx, anID)
	}},
	{"permits", "TryRelease", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.PermitExpirableSemaphore(n).TryRelease(ctx, anID)
		return err
	}},
	{"permits", "LeaseTime", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.PermitExpirableSemaphore(n).LeaseTime(ctx, anID)
		return err
	}},
	{"permits", "UpdateLease", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.PermitExpirableSemaphore(n).UpdateLease(ctx, anID, time.Minute)
	}},
	{"permits", "TrySetPermits", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.PermitExpirableSemaphore(n).TrySetPermits(ctx, 1)
		return err
	}},
	{"permits", "SetPermits", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.PermitExpirableSemaphore(n).SetPermits(ctx, 1)
	}},
	{"permits", "AddPermits", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.PermitExpirableSemaphore(n).AddPermits(ctx, 1)
	}},
	{"permits", "Permits", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, _, err := c.PermitExpirableSemaphore(n).Permits(ctx)
		return err
	}},
	{"rate limiter", "TrySetRate", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.RateLimiter(n).TrySetRate(ctx, reentrant.Rate{Permits: 1, Interval: time.Second})
		return err
	}},
	{"rate limiter", "SetRate", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.RateLimiter(n).SetRate(ctx, reentrant.Rate{Permits: 1, Interval: time.Second})
	}},
	{"rate limiter", "UpdateRate", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.RateLimiter(n).UpdateRate(ctx, reentrant.Rate{Permits: 1, Interval: time.Second})
		return err
	}},
	{"rate limiter", "Acquire", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.RateLimiter(n).Acquire(ctx, 1)
	}},
	{"rate limiter", "TryAcquire", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.RateLimiter(n).TryAcquire(ctx, 1)
		return err
	}},
	{"rate limiter", "Available", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.RateLimiter(n).Available(ctx)
		return err
	}},
	{"rate limiter", "Release", func(ctx context.Context, c *reentrant.Client, n string) error {
		return c.RateLimiter(n).Release(ctx, 1)
	}},
	{"rate limiter", "Config", func(ctx context.Context, c *reentrant.Client, n string) error {
		_, err := c.RateLimiter(n).Config(ctx)
		return err
	}},
}

// otherValues are values a synchronizer's key may hold by mistake: the
// commands that make one, and the type the error names. A rate limiter's
// key is a hash, so the hash is not a wrong value for it.
var otherValues = []struct {
	holds string
	make  []string
}{
	{"string", []string{"SET", "%s", "hello"}},
	{"string", []string{"SET", "%s", "12abc"}}, // a number first: the integer check is anchored
	{"hash", []string{"HSET", "%s", "f", "1"}},
	{"set", []string{"SADD", "%s", "m"}},
}

// Every synchronizer method on a key that holds something else than it
// expects returns ErrWrongType at once, naming the key and what it holds;
// no key is changed, and nothing is logged (it is no outage).
func TestSynchronizersOnAKeyOfAnotherType(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		var log logs
		c := e.client(t, reentrant.Options{Logger: slog.New(&log)})
		for _, v := range otherValues {
			for _, m := range syncMethods {
				if m.kind == "rate limiter" && v.holds == "hash" {
					continue
				}
				t.Run(v.holds+"/"+v.make[len(v.make)-1]+"/"+m.kind+"/"+m.name, func(t *testing.T) {
					name := fmt.Sprintf("wrong-%s-%s-%s-%s", v.holds, v.make[len(v.make)-1], strings.ReplaceAll(m.kind, " ", ""), m.name)
					args := slices.Clone(v.make)
					args[1] = name
					e.do(t, args...)
					before := e.snapshot(t)
					// Long enough that a call that waits for it to end is
					// plainly wrong: the error must come at once.
					ctx, cancel := context.WithTimeout(bg(), time.Minute)
					defer cancel()
					err := m.call(ctx, c, name)
					require.ErrorIs(t, err, reentrant.ErrWrongType)
					assert.NoError(t, ctx.Err(), "the error came at once")
					assert.Contains(t, err.Error(), fmt.Sprintf("%q", name), "the key is named")
					assert.Contains(t, err.Error(), "holds a "+v.holds, "what it holds is named")
					assert.Equal(t, before, e.snapshot(t), "nothing changed")
				})
			}
		}
		assert.Empty(t, log.at(slog.LevelInfo), "nothing logged")
	})
}

// snapshot returns every key with its type and value, to tell whether
// anything changed.
func (e env) snapshot(t *testing.T) map[string]string {
	t.Helper()
	keys, err := e.do(t, "KEYS", "*").AsStrSlice()
	require.NoError(t, err)
	out := map[string]string{}
	for _, k := range keys {
		typ, err := e.do(t, "TYPE", k).ToString()
		require.NoError(t, err)
		var value []string
		switch typ {
		case "string":
			s, err := e.do(t, "GET", k).ToString()
			require.NoError(t, err)
			value = []string{s}
		case "hash":
			var m map[string]string
			m, err = e.do(t, "HGETALL", k).AsStrMap()
			for f, v := range m {
				value = append(value, f+"="+v)
			}
		case "set":
			value, err = e.do(t, "SMEMBERS", k).AsStrSlice()
		case "zset":
			value, err = e.do(t, "ZRANGE", k, "0", "-1", "WITHSCORES").AsStrSlice()
		}
		require.NoError(t, err)
		slices.Sort(value)
		out[k] = typ + " " + strings.Join(value, ",")
	}
	return out
}
