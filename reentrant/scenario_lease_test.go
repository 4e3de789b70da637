package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// Every kind of lock gives its key the TTL asked for: the LeaseFor lease,
// or the watchdog timeout without one, and a read hold gives it to its own
// timeout key as well. Lease and timeout are odd values (57s, 43s), so
// that no default or hard-coded TTL can pass for them.
func TestAcquireSetsLease(t *testing.T) {
	e := onRedis(t)
	const watchdog, lease = 43 * time.Second, 57 * time.Second
	c := e.client(t, reentrant.Options{WatchdogTimeout: watchdog})
	type kind struct {
		name   string
		lock   func(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error)
		unlock func(ctx context.Context) error
		keys   []string // keys whose TTL the acquire sets
	}
	kinds := []kind{
		{"plain", c.Lock("plain").Lock, c.Lock("plain").Unlock, []string{"plain"}},
		{"fenced", c.FencedLock("fenced").Lock, c.FencedLock("fenced").Unlock, []string{"fenced"}},
		{"read", c.ReadWriteLock("read").ReadLock().Lock, c.ReadWriteLock("read").ReadLock().Unlock, []string{"read"}},
		{"write", c.ReadWriteLock("write").WriteLock().Lock, c.ReadWriteLock("write").WriteLock().Unlock, []string{"write"}},
		{"fair", c.FairLock("fair").Lock, c.FairLock("fair").Unlock, []string{"fair"}},
		{"spin", c.SpinLock("spin", reentrant.Backoff{}).Lock, c.SpinLock("spin", reentrant.Backoff{}).Unlock, []string{"spin"}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range []struct {
				opts []reentrant.LockOption
				ttl  time.Duration
			}{{nil, watchdog}, {[]reentrant.LockOption{reentrant.LeaseFor(lease)}, lease}} {
				held, err := k.lock(bg(), tc.opts...)
				require.NoError(t, err)
				keys := k.keys
				if k.name == "read" {
					o, _ := reentrant.OwnerFrom(held)
					keys = append(keys, "{read}:"+o.String()+":rwlock_timeout:1")
				}
				for _, key := range keys {
					ms := e.int(t, "PTTL", key)
					assert.LessOrEqual(t, ms, tc.ttl.Milliseconds(), key)
					assert.Greater(t, ms, (tc.ttl - 5*time.Second).Milliseconds(), "%s: TTL %dms, want %v", key, ms, tc.ttl)
				}
				require.NoError(t, k.unlock(held))
			}
		})
	}
}

// A re-entry or a release changes the TTL Redis keeps, and the local
// deadline of the hold follows it, so that the held context never outlives
// the key and is not cancelled while the key still lives:
//   - a re-entry with a shorter lease shortens the key's TTL, and with it the
//     deadline (kept at the longer lease, the context would outlive the key);
//   - the release of an inner acquisition restores the newest remaining
//     acquisition's lease, counted from the release (not from the released
//     acquisition's send time, which would cancel the context early).
func TestLeaseAcrossReentry(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	l := c.Lock("reentered")
	left := func(ctx context.Context) time.Duration {
		d, ok := reentrant.LeaseDeadline(ctx)
		require.True(t, ok)
		return time.Until(d)
	}

	outer, err := l.Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	inner, err := l.Lock(outer, reentrant.LeaseFor(time.Second))
	require.NoError(t, err)
	assert.LessOrEqual(t, e.int(t, "PTTL", "reentered"), int64(1000), "the shorter lease sets the TTL")
	assert.Less(t, left(outer), time.Second, "the deadline follows the key")
	select {
	case <-outer.Done():
		assert.ErrorIs(t, context.Cause(outer), reentrant.ErrLeaseEnded)
	case <-time.After(30 * time.Second):
		t.Fatal("the held context outlived its key")
	}
	// The context ends at the local deadline, a little before the key.
	eventually(t, "the key to expire", func() bool { return e.int(t, "EXISTS", "reentered") == 0 })

	// outer 5s, middle 9s, inner 5s, sent 3s before its release.
	outer, err = l.Lock(bg(), reentrant.LeaseFor(5*time.Second))
	require.NoError(t, err)
	middle, err := l.Lock(outer, reentrant.LeaseFor(9*time.Second))
	require.NoError(t, err)
	inner, err = l.Lock(middle, reentrant.LeaseFor(5*time.Second))
	require.NoError(t, err)
	time.Sleep(3 * time.Second) // the inner acquisition ages, within its lease
	require.NoError(t, l.Unlock(inner))
	ms := e.int(t, "PTTL", "reentered")
	assert.Greater(t, ms, int64(8000), "the newest remaining lease (middle's 9s) restored, not outer's 5s")
	assert.LessOrEqual(t, ms, int64(9000))
	assert.Greater(t, left(middle), 6500*time.Millisecond, "counted from the release (0.9 of 9s), not from the inner's send (5.1s left)")
	require.NoError(t, context.Cause(middle))
	require.NoError(t, l.Unlock(middle))
	require.NoError(t, l.Unlock(outer))
}
