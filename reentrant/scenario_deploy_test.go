package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// nameOn returns a lock name with the given prefix whose slot the node
// serves.
func nameOn(t *testing.T, n redistest.Node, prefix string) string {
	for i := 0; i < 100000; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		slot := int(scripts.Slot(name))
		for _, r := range n.Slots {
			if slot >= r[0] && slot <= r[1] {
				return name
			}
		}
	}
	t.Fatalf("no name for node %s", n.Addr)
	return ""
}

// One cluster for the cluster tests: forming one takes seconds.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	client := func(t *testing.T, opts reentrant.Options) *reentrant.Client {
		c, err := reentrant.New(cl.Client(), opts)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Every lock kind on every master, with plain names and names that
	// carry a hash tag: no script is CROSSSLOT, and waiters are woken on
	// sharded pub/sub, detected on Redis 7.
	t.Run("every kind on every master", func(t *testing.T) {
		c, other := client(t, reentrant.Options{}), client(t, reentrant.Options{})
		assert.Equal(t, reentrant.PubSubSharded, c.PubSubMode())
		masters := cl.Masters()
		require.Len(t, masters, 3)
		for _, m := range masters {
			for _, name := range []string{nameOn(t, m, "lock-"), "{" + nameOn(t, m, "tag-") + "}.orders"} {
				locks := map[string][2]*reentrant.Lock{
					"plain": {c.Lock(name), other.Lock(name)},
					"fair":  {c.FairLock(name + ":fair"), other.FairLock(name + ":fair")},
					"prio":  {c.PriorityLock(name + ":prio"), other.PriorityLock(name + ":prio")},
					"write": {c.ReadWriteLock(name + ":rw").WriteLock(), other.ReadWriteLock(name + ":rw").WriteLock()},
					"read":  {c.ReadWriteLock(name + ":rw2").ReadLock(), other.ReadWriteLock(name + ":rw2").WriteLock()},
					"group": {c.GroupLock(name+":group", "x", "y"), other.GroupLock(name+":group", "y")},
				}
				for kind, pair := range locks {
					held, err := pair[0].Lock(bg())
					require.NoError(t, err, "%s %s on %s", kind, name, m.Addr)
					got := make(chan error, 1)
					go func() {
						h, err := pair[1].Lock(bg(), reentrant.WaitAtMost(20*time.Second))
						if err == nil {
							err = pair[1].Unlock(h)
						}
						got <- err
					}()
					again, err := pair[0].Lock(held)
					require.NoError(t, err, "re-entry")
					require.NoError(t, pair[0].Unlock(again))
					require.NoError(t, pair[0].Unlock(held))
					require.NoError(t, recv(t, got), "%s %s: the waiter on another client", kind, name)
				}
				f := c.FencedLock(name + ":tokens")
				held, err := f.Lock(bg())
				require.NoError(t, err)
				token, _ := reentrant.TokenFrom(held)
				assert.Positive(t, token)
				require.NoError(t, f.Unlock(held))
			}
		}
	})

	// Replica sync on a cluster: WAIT goes to the node of the lock's slot,
	// in the script's pipeline. Every master's replica confirms; a frozen
	// one does not, and only that master's locks are refused.
	// Two locks on two masters, and owners whose edges hash to any slot:
	// detection reads each with single-key commands, and finds the cycle.
	t.Run("deadlock across masters", func(t *testing.T) {
		opts := reentrant.Options{DeadlockTimeout: 100 * time.Millisecond}
		c1, c2 := client(t, opts), client(t, opts)
		masters := cl.Masters()
		x, y := nameOn(t, masters[0], "dl-x-"), nameOn(t, masters[1], "dl-y-")
		x1, y2 := c1.Lock(x), c2.Lock(y)
		got := runCycle(t, []waitFor{
			{"a", c1.Lock(y), holding(t, x1), x1},
			{"b", c2.Lock(x), holding(t, y2), y2},
		})
		assert.Len(t, victims(t, got), 1, "exactly one victim")
	})

	// Each master's own replica, as at least one and as Redisson counts
	// (ConnectedReplicas: read per slot's master with ROLE).
	for name, replicas := range map[string]int{"at least one": 1, "as Redisson": reentrant.ConnectedReplicas} {
		t.Run("replica sync on every master, "+name, func(t *testing.T) { replicaSyncOnEveryMaster(t, cl, client, replicas) })
	}

	// Three clients contend for locks on each master; the in-section flag
	// catches any overlap.
	t.Run("contention across 3 clients", func(t *testing.T) {
		clients := []*reentrant.Client{client(t, reentrant.Options{}), client(t, reentrant.Options{}), client(t, reentrant.Options{})}
		for _, m := range cl.Masters() {
			name := nameOn(t, m, "contended-")
			var locks []*reentrant.Lock
			for g := 0; g < 6; g++ {
				locks = append(locks, clients[g%3].Lock(name))
			}
			overlaps, entries := contend(t, locks, 30)
			assert.Zero(t, overlaps, "on %s", m.Addr)
			assert.Equal(t, int64(180), entries)
		}
	})

	// CLUSTER FAILOVER of the master that holds a lock: the holder's
	// renewal goes on (a planned failover loses no write), and a waiter on
	// another client takes the lock after the release.
	t.Run("failover of the holding master", func(t *testing.T) {
		holder := client(t, reentrant.Options{WatchdogTimeout: 3 * time.Second})
		waiter := client(t, reentrant.Options{RepollInterval: 200 * time.Millisecond})
		name := "failover-" + fmt.Sprint(time.Now().UnixNano())
		master, replica := cl.MasterOf(int(scripts.Slot(name)))
		held, err := holder.Lock(name).Lock(bg())
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			h, err := waiter.Lock(name).Lock(bg(), reentrant.WaitAtMost(60*time.Second))
			if err == nil {
				err = waiter.Lock(name).Unlock(h)
			}
			got <- err
		}()
		require.NoError(t, cl.Server(replica.Addr).Do("CLUSTER", "FAILOVER").Error())
		redistest.Eventually(t, 30*time.Second, "the replica takes over", func() bool {
			m, ok := cl.Owner(int(scripts.Slot(name)))
			return ok && m.ID == replica.ID
		})
		cl.WaitHealthy()
		// Two renewal periods on the new master.
		time.Sleep(2 * time.Second)
		lost := held.Err() != nil
		t.Logf("after the failover of %s: hold kept: %v (cause %v)", master.Addr, !lost, context.Cause(held))
		err = holder.Lock(name).Unlock(held)
		if lost {
			assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost, "a lost hold is told")
		} else {
			require.NoError(t, err, "a kept hold releases cleanly")
		}
		require.NoError(t, recv(t, got), "the waiter after the release")
	})

	// A slot moved to another master while waiters wait: the server drops
	// their sharded subscription; they resubscribe on the new owner and are
	// woken by the release there. Re-polls are a minute apart and the
	// holder's TTL 30 s, so waiters that pass within 20 s were woken.
	t.Run("slot migrated while waiters wait", func(t *testing.T) {
		holder := client(t, reentrant.Options{})
		waiters := []*reentrant.Client{client(t, reentrant.Options{RepollInterval: time.Minute}), client(t, reentrant.Options{RepollInterval: time.Minute})}
		name := "migrating-" + fmt.Sprint(time.Now().UnixNano())
		slot := int(scripts.Slot(name))
		held, err := holder.Lock(name).Lock(bg())
		require.NoError(t, err)
		var wg sync.WaitGroup
		var passed atomic.Int64
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func(l *reentrant.Lock) {
				defer wg.Done()
				h, err := l.Lock(bg(), reentrant.WaitAtMost(20*time.Second))
				if assert.NoError(t, err, "woken after the migration") {
					passed.Add(1)
					assert.NoError(t, l.Unlock(h))
				}
			}(waiters[i%2].Lock(name))
		}
		time.Sleep(200 * time.Millisecond) // let them subscribe and wait
		from, _ := cl.Owner(slot)
		var to redistest.Node
		for _, n := range cl.Masters() {
			if n.ID != from.ID {
				to = n
				break
			}
		}
		migrateSlot(t, cl, slot, from, to)
		redistest.Eventually(t, 30*time.Second, "the slot moved", func() bool {
			m, ok := cl.Owner(slot)
			return ok && m.ID == to.ID
		})
		// The holder's renewals follow the key; its release wakes them.
		require.NoError(t, holder.Lock(name).Unlock(held))
		waitAll(t, &wg, redistest.Within, func() {})
		assert.Equal(t, int64(6), passed.Load())
	})
}

// migrateSlot moves one slot and its keys from one master to another, as
// redis-cli --cluster reshard does.
func migrateSlot(t *testing.T, cl *redistest.Cluster, slot int, from, to redistest.Node) {
	src, dst := cl.Server(from.Addr), cl.Server(to.Addr)
	s := fmt.Sprint(slot)
	require.NoError(t, dst.Do("CLUSTER", "SETSLOT", s, "IMPORTING", from.ID).Error())
	require.NoError(t, src.Do("CLUSTER", "SETSLOT", s, "MIGRATING", to.ID).Error())
	host, port := splitAddr(to.Addr)
	for {
		keys, err := src.Do("CLUSTER", "GETKEYSINSLOT", s, "100").AsStrSlice()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
		require.NoError(t, src.Do(args...).Error())
	}
	for _, n := range cl.Masters() {
		require.NoError(t, cl.Server(n.Addr).Do("CLUSTER", "SETSLOT", s, "NODE", to.ID).Error())
	}
}

func splitAddr(addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return addr, ""
}

// Sentinel: the master is killed while a lock is held and waiters wait. A
// new master is elected; the holder's hold either survived (it was
// replicated in time) or its context was cancelled; afterwards everything is
// acquired and released cleanly.
func TestSentinelFailover(t *testing.T) {
	r := redistest.StartReplicated(t, 2)
	s := redistest.StartSentinels(t, r.Master, 3, 2)
	connect := func() rueidis.Client {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.Addrs, DisableCache: true,
			Sentinel: rueidis.SentinelOption{MasterSet: s.Master}})
		require.NoError(t, err)
		t.Cleanup(rdb.Close)
		return rdb
	}
	holder, err := reentrant.New(connect(), reentrant.Options{WatchdogTimeout: 6 * time.Second})
	require.NoError(t, err)
	defer holder.Close()
	waiter, err := reentrant.New(connect(), reentrant.Options{RepollInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	defer waiter.Close()

	held, err := holder.Lock("sentinel").Lock(bg())
	require.NoError(t, err)
	got := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			h, err := waiter.Lock("sentinel").Lock(bg(), reentrant.WaitAtMost(90*time.Second))
			if err == nil {
				err = waiter.Lock("sentinel").Unlock(h)
			}
			got <- err
		}()
	}
	old := r.Master.Addr
	r.Master.Kill()
	redistest.Eventually(t, 60*time.Second, "a new master elected", func() bool {
		a, err := s.MasterAddr()
		return err == nil && a != old
	})
	// Two renewal periods on the new master.
	time.Sleep(5 * time.Second)
	lost := held.Err() != nil
	t.Logf("after the failover: hold kept: %v (cause %v)", !lost, context.Cause(held))
	err = holder.Lock("sentinel").Unlock(held)
	if lost {
		assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
	} else if err != nil {
		// Kept until the release found it gone: it must have been told.
		assert.True(t, errors.Is(err, reentrant.ErrLockLost), "unlock: %v", err)
	}
	for i := 0; i < 3; i++ {
		require.NoError(t, recv(t, got), "waiter %d after the failover", i)
	}
	h, err := holder.Lock("sentinel").Lock(bg())
	require.NoError(t, err)
	require.NoError(t, holder.Lock("sentinel").Unlock(h))
}

// replicaSyncOnEveryMaster: a lock on each master is confirmed by that
// master's replica; with one replica frozen, its master's acquires are
// refused and the others' go on.
func replicaSyncOnEveryMaster(t *testing.T, cl *redistest.Cluster, client func(*testing.T, reentrant.Options) *reentrant.Client, replicas int) {
	// 2s: a loaded machine (four copies of the suite under -race) once
	// kept a healthy replica's acknowledgement past 200ms.
	c := client(t, reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: replicas, Timeout: 2 * time.Second}})
	require.Equal(t, replicas, c.ReplicaSync().Replicas)
	masters := cl.Masters()
	for _, m := range masters {
		l := c.Lock(nameOn(t, m, "synced-"))
		held, err := l.Lock(bg())
		require.NoError(t, err, "on %s", m.Addr)
		require.NoError(t, l.Unlock(held))
	}
	m, replica := cl.MasterOf(int(scripts.Slot(nameOn(t, masters[0], "synced-"))))
	frozen := cl.Server(replica.Addr)
	frozen.Pause()
	_, err := c.Lock(nameOn(t, m, "synced-")).Lock(bg())
	assert.ErrorIs(t, err, reentrant.ErrNotSynced, "the frozen replica's master")
	held, err := c.Lock(nameOn(t, masters[1], "synced-")).Lock(bg())
	assert.NoError(t, err, "another master")
	if err == nil {
		require.NoError(t, c.Lock(nameOn(t, masters[1], "synced-")).Unlock(held))
	}
	frozen.Resume()
	cl.WaitHealthy()
}
