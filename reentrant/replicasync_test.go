package reentrant_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// follow returns a rueidis client whose connections go to *addr, read at
// each dial: a standalone client that follows a manual failover.
func follow(t *testing.T, addr *atomic.Pointer[string]) rueidis.Client {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{*addr.Load()},
		DisableCache: true,
		DialCtxFn: func(ctx context.Context, _ string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", *addr.Load())
		},
	})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	return rdb
}

// With its only replica frozen, every acquire in "at least one" mode is
// refused with ErrNotSynced and rolled back: the frozen replica is never
// counted. Once it runs again, acquires are confirmed and reach it.
func TestReplicaSyncRefusesWithoutReplica(t *testing.T) {
	r := redistest.StartReplicated(t, 1)
	rdb := r.Master.Client()
	c, err := reentrant.New(rdb, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: 100 * time.Millisecond}})
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, 1, c.ReplicaSync().Replicas)

	r.Replicas[0].Pause()
	for _, l := range []*reentrant.Lock{c.Lock("synced"), c.FairLock("synced-fair"), c.ReadWriteLock("synced-rw").WriteLock()} {
		for i := 0; i < 3; i++ {
			_, err := l.Lock(bg())
			require.ErrorIs(t, err, reentrant.ErrNotSynced, "%s, try %d", l.Name(), i)
			assert.Equal(t, 1, strings.Count(err.Error(), "relock:"), "the prefix once: %q", err.Error())
			n, err := r.Master.Do("HLEN", l.Name()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "%s: the acquire was rolled back", l.Name())
		}
	}
	// A re-entry that is not confirmed leaves the outer hold as it was.
	r.Replicas[0].Resume()
	r.WaitAcked(t)
	l := c.Lock("synced")
	outer, err := l.Lock(bg())
	require.NoError(t, err)
	r.Replicas[0].Pause()
	_, err = l.Lock(outer)
	require.ErrorIs(t, err, reentrant.ErrNotSynced)
	n, _ := l.HoldCount(outer)
	assert.Equal(t, 1, n, "the re-entry was rolled back")
	r.Replicas[0].Resume()
	r.WaitAcked(t)
	require.NoError(t, l.Unlock(outer))

	held, err := l.Lock(bg())
	require.NoError(t, err)
	n64, err := r.Replicas[0].Do("HLEN", "synced").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n64, "a confirmed acquire is on the replica when Lock returns")
	require.NoError(t, l.Unlock(held))
}

// A server that refuses WAIT is found at New: sync is turned off with a
// warning, or New fails with ErrSyncUnavailable when sync is required.
func TestReplicaSyncRefusedWait(t *testing.T) {
	s := redistest.Start(t)
	require.NoError(t, s.Do("ACL", "SETUSER", "default", "-wait").Error())
	rdb := s.Client()
	c, err := reentrant.New(rdb, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: 1}})
	require.NoError(t, err)
	assert.Zero(t, c.ReplicaSync().Replicas, "sync off")
	held, err := c.Lock("no-wait").Lock(bg())
	require.NoError(t, err)
	require.NoError(t, c.Lock("no-wait").Unlock(held))
	c.Close()

	_, err = reentrant.New(rdb, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Required: true}})
	assert.ErrorIs(t, err, reentrant.ErrSyncUnavailable)

	// ConnectedReplicas needs ROLE as well.
	require.NoError(t, s.Do("ACL", "SETUSER", "default", "+wait", "-role").Error())
	c, err = reentrant.New(rdb, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: reentrant.ConnectedReplicas}})
	require.NoError(t, err)
	assert.Zero(t, c.ReplicaSync().Replicas, "sync off without ROLE")
	held, err = c.Lock("no-role").Lock(bg())
	require.NoError(t, err)
	require.NoError(t, c.Lock("no-role").Unlock(held))
	c.Close()
	_, err = reentrant.New(rdb, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: reentrant.ConnectedReplicas, Required: true}})
	assert.ErrorIs(t, err, reentrant.ErrSyncUnavailable)
}

// The lock a failover loses: the only replica is frozen and its link cut, a
// lock is taken, the master is killed and the replica, which never got the
// lock, is promoted. With sync off the hold is lost, and its context is cancelled
// within one renewal period of the client reaching the new master. With
// "at least one" sync the acquire is refused in the first place.
func TestFailoverLosesLock(t *testing.T) {
	const watchdog = 900 * time.Millisecond // renewal every 300ms
	t.Run("off", func(t *testing.T) {
		r := redistest.StartReplicated(t, 1)
		var addr atomic.Pointer[string]
		addr.Store(&r.Master.Addr)
		c, err := reentrant.New(follow(t, &addr), reentrant.Options{WatchdogTimeout: watchdog})
		require.NoError(t, err)
		defer c.Close()

		// Frozen, and cut off: what the master already sent it would
		// still be in its socket buffer when it resumes.
		r.Replicas[0].Pause()
		require.NoError(t, r.Master.Do("CLIENT", "KILL", "TYPE", "replica").Error())
		held, err := c.Lock("failover").Lock(bg())
		require.NoError(t, err)
		r.Master.Kill()
		r.Replicas[0].Resume()
		require.NoError(t, r.Replicas[0].Do("REPLICAOF", "NO", "ONE").Error())
		addr.Store(&r.Replicas[0].Addr)
		promoted := time.Now()
		select {
		case <-held.Done():
			told := time.Since(promoted)
			t.Logf("holder told %v after the promotion: %v", told, context.Cause(held))
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
			assert.Less(t, told, watchdog/3+500*time.Millisecond, "within one renewal period and a reconnect")
		case <-time.After(30 * time.Second):
			t.Fatal("the holder was never told its lock was lost")
		}
	})
	t.Run("at least one", func(t *testing.T) {
		r := redistest.StartReplicated(t, 1)
		c, err := reentrant.New(r.Master.Client(), reentrant.Options{WatchdogTimeout: watchdog,
			ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: 100 * time.Millisecond}})
		require.NoError(t, err)
		defer c.Close()
		r.Replicas[0].Pause()
		_, err = c.Lock("failover").Lock(bg())
		require.ErrorIs(t, err, reentrant.ErrNotSynced)
		assert.False(t, errors.Is(err, reentrant.ErrLockLost))
		r.Replicas[0].Resume()
	})
}

// Renewals are synced too: with the replica frozen, a held lock's renewals
// are not confirmed and the hold is lost at its local deadline.
func TestReplicaSyncRenewal(t *testing.T) {
	r := redistest.StartReplicated(t, 1)
	c, err := reentrant.New(r.Master.Client(), reentrant.Options{WatchdogTimeout: 600 * time.Millisecond,
		ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: 150 * time.Millisecond}})
	require.NoError(t, err)
	defer c.Close()
	r.WaitAcked(t)
	held, err := c.Lock("renewed").Lock(bg())
	require.NoError(t, err)
	r.Replicas[0].Pause()
	defer r.Replicas[0].Resume()
	select {
	case <-held.Done():
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
	case <-time.After(30 * time.Second):
		t.Fatal("a hold whose renewals no replica confirms was kept")
	}
}

// ConnectedReplicas does as Redisson's checkLockSyncedSlaves: a master
// with no replica gets no WAIT (one ROLE finds there is none); with
// replicas, WAIT asks for all of them and one confirmation is enough;
// with every replica frozen, the acquire is refused and rolled back.
func TestReplicaSyncConnected(t *testing.T) {
	connected := reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: reentrant.ConnectedReplicas, Timeout: 200 * time.Millisecond}}
	calls := func(t *testing.T, s *redistest.Server, cmd string) int64 {
		t.Helper()
		return s.CommandStats()[cmd].Calls
	}

	alone := redistest.Start(t)
	c, err := reentrant.New(alone.Client(), connected)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, reentrant.ConnectedReplicas, c.ReplicaSync().Replicas)
	require.NoError(t, alone.Do("CONFIG", "RESETSTAT").Error())
	for range 3 {
		held, err := c.Lock("alone").Lock(bg())
		require.NoError(t, err, "a master with no replica needs none")
		require.NoError(t, c.Lock("alone").Unlock(held))
	}
	assert.Zero(t, calls(t, alone, "wait"), "no WAIT to a master with no replica")
	assert.Equal(t, int64(1), calls(t, alone, "role"), "one ROLE found there is none")

	r := redistest.StartReplicated(t, 2)
	c2, err := reentrant.New(r.Master.Client(), connected)
	require.NoError(t, err)
	defer c2.Close()
	l := c2.Lock("replicated")
	held, err := l.Lock(bg())
	require.NoError(t, err)
	require.NoError(t, l.Unlock(held))
	assert.Positive(t, calls(t, r.Master, "wait"), "WAIT for the replicas")

	r.Replicas[0].Pause()
	held, err = l.Lock(bg())
	require.NoError(t, err, "one replica of two confirming is enough")
	require.NoError(t, l.Unlock(held))
	r.Replicas[1].Pause()
	_, err = l.Lock(bg())
	require.ErrorIs(t, err, reentrant.ErrNotSynced, "no replica confirmed")
	n, err := r.Master.Do("HLEN", "replicated").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the refused acquire was rolled back")
	r.Replicas[0].Resume()
	r.Replicas[1].Resume()
}

// ConnectedReplicas through Sentinel: ROLE and WAIT reach the master the
// sentinels name, and its replica confirms.
func TestReplicaSyncConnectedSentinel(t *testing.T) {
	r := redistest.StartReplicated(t, 1)
	s := redistest.StartSentinels(t, r.Master, 3, 2)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.Addrs, DisableCache: true,
		Sentinel: rueidis.SentinelOption{MasterSet: s.Master}})
	require.NoError(t, err)
	defer rdb.Close()
	c, err := reentrant.New(rdb, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: reentrant.ConnectedReplicas, Timeout: 200 * time.Millisecond}})
	require.NoError(t, err)
	defer c.Close()
	l := c.Lock("sentinel-synced")
	held, err := l.Lock(bg())
	require.NoError(t, err)
	n, err := r.Replicas[0].Do("HLEN", "sentinel-synced").AsInt64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "confirmed by the replica before Lock returned")
	require.NoError(t, l.Unlock(held))

	r.Replicas[0].Pause()
	_, err = l.Lock(bg())
	assert.ErrorIs(t, err, reentrant.ErrNotSynced, "its only replica frozen")
	r.Replicas[0].Resume()
}
