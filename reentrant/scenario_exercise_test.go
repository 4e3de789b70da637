package reentrant_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// What the deployment and ACL tests run on each setup: every lock kind and
// synchronizer, between two clients.

// lockKinds pairs, for each lock kind, a handle on c with one on other,
// on names that start with prefix. The read lock's partner is the write
// side, which must wait for it.
func lockKinds(c, other *reentrant.Client, prefix string) map[string][2]*reentrant.Lock {
	return map[string][2]*reentrant.Lock{
		"plain":  {c.Lock(prefix + "plain"), other.Lock(prefix + "plain")},
		"fair":   {c.FairLock(prefix + "fair"), other.FairLock(prefix + "fair")},
		"prio":   {c.PriorityLock(prefix + "prio"), other.PriorityLock(prefix + "prio")},
		"fenced": {c.FencedLock(prefix + "fenced"), other.FencedLock(prefix + "fenced")},
		"spin":   {c.SpinLock(prefix+"spin", reentrant.Backoff{}), other.SpinLock(prefix+"spin", reentrant.Backoff{})},
		"write":  {c.ReadWriteLock(prefix + "rw").WriteLock(), other.ReadWriteLock(prefix + "rw").WriteLock()},
		"read":   {c.ReadWriteLock(prefix + "rw2").ReadLock(), other.ReadWriteLock(prefix + "rw2").WriteLock()},
		// Values that overlap: b waits for a's.
		"group": {c.GroupLock(prefix+"group", "x", "y"), other.GroupLock(prefix+"group", "y", "z")},
	}
}

// handOver holds a lock on a, makes b wait for it, re-enters on a, and
// releases: b must be handed the lock.
func handOver(t *testing.T, what string, a, b *reentrant.Lock) {
	t.Helper()
	held, err := a.Lock(bg())
	require.NoError(t, err, what)
	got := make(chan error, 1)
	go func() {
		h, err := b.Lock(bg(), reentrant.WaitAtMost(20*time.Second))
		if err == nil {
			err = b.Unlock(h)
		}
		got <- err
	}()
	again, err := a.Lock(held)
	require.NoError(t, err, "%s: re-entry", what)
	require.NoError(t, a.Unlock(again), what)
	require.NoError(t, a.Unlock(held), what)
	require.NoError(t, recv(t, got), "%s: the waiter on another client", what)
}

// exercise hands every lock kind over between c and other, both ways, and
// wakes a waiter of each synchronizer by a change from the other client;
// the names start with prefix (which must have no "{": a latch's channel
// braces its whole name).
func exercise(t *testing.T, c, other *reentrant.Client, prefix string) {
	t.Helper()
	for kind, pair := range lockKinds(c, other, prefix) {
		handOver(t, kind+" to another client", pair[0], pair[1])
		handOver(t, kind+" from another client", pair[1], pair[0])
	}
	sem := c.Semaphore(prefix + "sem")
	_, err := sem.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	require.NoError(t, other.Semaphore(prefix+"sem").Acquire(bg(), 1))
	woken := make(chan error, 1)
	go func() { woken <- sem.Acquire(bg(), 1, reentrant.WaitAtMost(20*time.Second)) }()
	require.NoError(t, other.Semaphore(prefix+"sem").Release(bg(), 1))
	require.NoError(t, recv(t, woken), "semaphore waiter")
	require.NoError(t, sem.Release(bg(), 1))

	ps := c.PermitExpirableSemaphore(prefix + "permits")
	_, err = ps.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	p, err := ps.Acquire(bg())
	require.NoError(t, err)
	go func() {
		p2, err := other.PermitExpirableSemaphore(prefix+"permits").Acquire(bg(), reentrant.WaitAtMost(20*time.Second))
		if err == nil {
			err = p2.Release(bg())
		}
		woken <- err
	}()
	require.NoError(t, p.Release(bg()))
	require.NoError(t, recv(t, woken), "permit waiter")

	latch := c.CountDownLatch(prefix + "latch")
	_, err = latch.TrySetCount(bg(), 1)
	require.NoError(t, err)
	go func() { woken <- latch.Await(bg(), reentrant.WaitAtMost(20*time.Second)) }()
	require.NoError(t, other.CountDownLatch(prefix+"latch").CountDown(bg()))
	require.NoError(t, recv(t, woken), "latch waiter")

	for _, perClient := range []bool{false, true} {
		rl := c.RateLimiter(prefix + map[bool]string{false: "rate", true: "rate-per-client"}[perClient])
		require.NoError(t, rl.SetRate(bg(), reentrant.Rate{Permits: 1, Interval: 200 * time.Millisecond, PerClient: perClient}))
		require.NoError(t, rl.Acquire(bg(), 1))
		require.NoError(t, rl.Acquire(bg(), 1, reentrant.WaitAtMost(20*time.Second)), "rate limiter waiter")
	}

	info, err := c.Inspect(bg(), prefix+"sem")
	require.NoError(t, err)
	assert.Equal(t, prefix+"sem", info.Name)
}
