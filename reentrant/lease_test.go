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
