package reentrant_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// holding takes l with a new owner and returns the held context.
func holding(t *testing.T, l *reentrant.Lock) context.Context {
	t.Helper()
	held, err := l.Lock(bg())
	require.NoError(t, err)
	return held
}

// deadlockOpts detects after 100ms.
var deadlockOpts = reentrant.Options{DeadlockTimeout: 100 * time.Millisecond}

// waitFor is one owner's wait in a cycle: it takes lock with held (the
// owner's held context), and on ErrDeadlock gives back what the owner
// holds, as a caller should.
type waitFor struct {
	name string
	lock *reentrant.Lock
	held context.Context
	own  *reentrant.Lock // the lock held's hold is on
}

// runCycle starts every wait, and returns each one's error once all have
// ended: the victim's, then the others', which go on after it gives its
// lock back.
func runCycle(t *testing.T, waits []waitFor) map[string]error {
	type result struct {
		name string
		err  error
	}
	done := make(chan result, len(waits))
	start := time.Now()
	for _, w := range waits {
		go func() {
			h, err := w.lock.Lock(w.held, reentrant.WaitAtMost(time.Minute))
			if err == nil {
				err = w.lock.Unlock(h)
			} else if errors.Is(err, reentrant.ErrDeadlock) {
				t.Logf("%s: ErrDeadlock after %v", w.name, time.Since(start))
			}
			assert.NoError(t, w.own.Unlock(w.held), "%s gives back what it held", w.name)
			done <- result{w.name, err}
		}()
	}
	got := map[string]error{}
	for range waits {
		select {
		case r := <-done:
			got[r.name] = r.err
		case <-time.After(time.Minute):
			t.Fatalf("the cycle did not end: %v so far", got)
		}
	}
	return got
}

// victims returns the names whose wait ended with ErrDeadlock, and fails
// the test on any other error.
func victims(t *testing.T, got map[string]error) []string {
	var v []string
	for name, err := range got {
		switch {
		case errors.Is(err, reentrant.ErrDeadlock):
			v = append(v, name)
		default:
			assert.NoError(t, err, name)
		}
	}
	return v
}

// Two owners on two clients, each holding the lock the other waits for:
// exactly one gives up with ErrDeadlock, whose DeadlockError lists both
// edges, and the other takes its lock.
func TestDeadlockTwoOwners(t *testing.T) {
	e := onRedis(t)
	c1, c2 := e.client(t, deadlockOpts), e.client(t, deadlockOpts)
	x1, y2 := c1.Lock("x"), c2.Lock("y")
	ha := holding(t, x1)
	hb := holding(t, y2)
	a, _ := reentrant.OwnerFrom(ha)
	b, _ := reentrant.OwnerFrom(hb)

	var dl *reentrant.DeadlockError
	got := runCycle(t, []waitFor{
		{"a", c1.Lock("y"), ha, x1},
		{"b", c2.Lock("x"), hb, y2},
	})
	v := victims(t, got)
	require.Len(t, v, 1, "exactly one victim")
	require.ErrorAs(t, got[v[0]], &dl)
	require.Len(t, dl.Cycle, 2)
	assert.Equal(t, dl.Cycle[0].Holder, dl.Cycle[1].Waiter)
	assert.Equal(t, dl.Cycle[1].Holder, dl.Cycle[0].Waiter)
	assert.ElementsMatch(t, []string{a.String(), b.String()}, []string{dl.Cycle[0].Waiter, dl.Cycle[1].Waiter})
	assert.Contains(t, got[v[0]].Error(), "waits for lock")
	eventually(t, "no wait left registered", func() bool {
		keys, err := e.do(t, "KEYS", "relock_wait:*").AsStrSlice()
		return err == nil && len(keys) == 0
	})
}

// Three owners, three kinds of lock (plain, fair, the write side of a
// read-write lock): one cycle, one victim.
func TestDeadlockThreeKinds(t *testing.T) {
	e := onRedis(t)
	c1, c2, c3 := e.client(t, deadlockOpts), e.client(t, deadlockOpts), e.client(t, deadlockOpts)
	x, y, w := c1.Lock("x"), c2.FairLock("y"), c3.ReadWriteLock("w").WriteLock()
	ha := holding(t, x)
	hb := holding(t, y)
	hc := holding(t, w)
	got := runCycle(t, []waitFor{
		{"a", c1.FairLock("y"), ha, x},
		{"b", c2.ReadWriteLock("w").WriteLock(), hb, y},
		{"c", c3.Lock("x"), hc, w},
	})
	v := victims(t, got)
	require.Len(t, v, 1, "exactly one victim")
	var dl *reentrant.DeadlockError
	require.ErrorAs(t, got[v[0]], &dl)
	assert.Len(t, dl.Cycle, 3)
}

// An owner that holds a read lock and asks for the write lock of the same
// lock waits for itself: reported at once, not after DeadlockTimeout (a
// minute here).
func TestDeadlockReadToWrite(t *testing.T) {
	e := onRedis(t)
	hooked := make(chan *reentrant.DeadlockError, 1)
	c := e.client(t, reentrant.Options{DeadlockTimeout: time.Minute, Hooks: reentrant.Hooks{
		Deadlock: func(_ context.Context, e *reentrant.DeadlockError) { hooked <- e },
	}})
	rw := c.ReadWriteLock("rw")
	h, err := rw.ReadLock().Lock(bg())
	require.NoError(t, err)
	done := async(func() error {
		_, err := rw.WriteLock().Lock(h)
		return err
	})
	select {
	case err := <-done:
		var dl *reentrant.DeadlockError
		require.ErrorAs(t, err, &dl)
		require.Len(t, dl.Cycle, 1)
		assert.Equal(t, dl.Cycle[0].Waiter, dl.Cycle[0].Holder)
		assert.Same(t, dl, recv(t, hooked), "Hooks.Deadlock saw it first")
	case <-time.After(30 * time.Second):
		t.Fatal("the self-wait was not reported")
	}
	require.NoError(t, rw.ReadLock().Unlock(h))
}

// No cycle, no victim: a waiter that gave up before the other began to
// wait, and a holder that gave its lock back while the other waited for
// it, leave nobody failed.
func TestDeadlockNotReported(t *testing.T) {
	e := onRedis(t)
	c1, c2 := e.client(t, deadlockOpts), e.client(t, deadlockOpts)
	x1, y2 := c1.Lock("x"), c2.Lock("y")

	// a waits for y past the timeout, and gives up; then b waits for x.
	ha := holding(t, x1)
	hb := holding(t, y2)
	_, ok, err := c1.Lock("y").TryLock(ha, reentrant.WaitAtMost(300*time.Millisecond))
	require.NoError(t, err)
	require.False(t, ok)
	bx := async(func() error {
		h, err := c2.Lock("x").Lock(hb)
		if err == nil {
			err = c2.Lock("x").Unlock(h)
		}
		return err
	})
	time.Sleep(300 * time.Millisecond) // past b's timeout: it checks, and must find nothing
	require.NoError(t, x1.Unlock(ha))
	within(t, bx, 30*time.Second, "b takes x once a gives it back")
	require.NoError(t, y2.Unlock(hb))

	// a waits for y, and b for x, which would close a cycle; but y's
	// holder gives it back (from another goroutine) before b checks (its
	// client's timeout is long): a takes y, then gives x back, and b takes
	// it.
	slow := e.client(t, reentrant.Options{DeadlockTimeout: time.Minute})
	ha = holding(t, x1)
	hb = holding(t, slow.Lock("y"))
	ay := async(func() error {
		h, err := c1.Lock("y").Lock(ha)
		if err == nil {
			err = c1.Lock("y").Unlock(h)
		}
		if err == nil {
			err = x1.Unlock(ha)
		}
		return err
	})
	eventually(t, "a to register its wait", func() bool {
		keys, err := e.do(t, "KEYS", "relock_wait:*").AsStrSlice()
		return err == nil && len(keys) == 1
	})
	b, _ := reentrant.OwnerFrom(hb)
	bx = async(func() error {
		// As b's owner, not with hb, which giving y back cancels.
		h, err := slow.Lock("x").Lock(reentrant.WithOwner(bg(), b))
		if err == nil {
			err = slow.Lock("x").Unlock(h)
		}
		return err
	})
	require.NoError(t, slow.Lock("y").Unlock(hb))
	within(t, ay, 30*time.Second, "a takes y")
	within(t, bx, 30*time.Second, "b takes x")
}

// With DeadlockTimeout negative nothing is detected: both waits run to
// their limit, and nothing is registered.
func TestDeadlockDetectionOff(t *testing.T) {
	e := onRedis(t)
	off := reentrant.Options{DeadlockTimeout: -1}
	c1, c2 := e.client(t, off), e.client(t, off)
	x1, y2 := c1.Lock("x"), c2.Lock("y")
	ha := holding(t, x1)
	hb := holding(t, y2)
	a := async(func() error { _, err := c1.Lock("y").Lock(ha, reentrant.WaitAtMost(500*time.Millisecond)); return err })
	b := async(func() error { _, err := c2.Lock("x").Lock(hb, reentrant.WaitAtMost(500*time.Millisecond)); return err })
	for _, done := range []<-chan error{a, b} {
		assert.ErrorIs(t, recv(t, done), reentrant.ErrNotAcquired)
	}
	keys, err := e.do(t, "KEYS", "relock_wait:*").AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys, "no wait registered")
	require.NoError(t, x1.Unlock(ha))
	require.NoError(t, y2.Unlock(hb))
}

// commandCalls returns how many times the server ran each of cmds since
// its last CONFIG RESETSTAT, scripts' calls included.
func commandCalls(t *testing.T, e env, cmds ...string) map[string]int64 {
	stats := e.server.CommandStats()
	got := map[string]int64{}
	for _, cmd := range cmds {
		if st, ok := stats[cmd]; ok {
			got[cmd] = st.Calls
		}
	}
	return got
}

// What detection costs a long wait by an owner that holds a lock, for a
// lock whose holder is not waiting (the common case): at most one check
// per re-poll interval after DeadlockTimeout, each one SET of its edge, one
// HGETALL of the lock and one GET of the holder's edge; one DEL when the
// wait ends. With detection off, none.
func TestDeadlockCost(t *testing.T) {
	for _, on := range []bool{true, false} {
		e := onRedis(t)
		opts := reentrant.Options{DeadlockTimeout: 200 * time.Millisecond, RepollInterval: 500 * time.Millisecond}
		if !on {
			opts.DeadlockTimeout = -1
		}
		holder, waiter := e.client(t), e.client(t, opts)
		_, err := holder.Lock("x").Lock(bg())
		require.NoError(t, err)
		hy, err := waiter.Lock("y").Lock(bg())
		require.NoError(t, err)
		require.NoError(t, e.do(t, "CONFIG", "RESETSTAT").Error())
		_, err = waiter.Lock("x").Lock(hy, reentrant.WaitAtMost(2200*time.Millisecond))
		require.ErrorIs(t, err, reentrant.ErrNotAcquired)
		got := commandCalls(t, e, "set", "hgetall", "get", "del")
		t.Logf("detection %v: a 2.2s wait sent %v", on, got)
		if !on {
			assert.Empty(t, got)
			continue
		}
		checks := got["set"]
		assert.True(t, checks >= 1 && checks <= 5, "one check at 200ms, then at most one per 500ms: %d", checks)
		assert.Equal(t, checks, got["hgetall"], "one HGETALL per check")
		assert.Equal(t, checks, got["get"], "one GET per check")
		assert.Equal(t, int64(1), got["del"], "one DEL at the end")
	}
}

// lostEdgeReply runs every command, but answers the SET that registers a
// wait as if the reply had been lost on a broken connection: the edge is
// in Redis, and its waiter was not told so. lost counts those SETs.
type lostEdgeReply struct {
	rueidis.Client
	lost *atomic.Int32
}

func (c lostEdgeReply) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands() // read before Do, which may recycle cmd
	lost := args[0] == "SET" && strings.HasPrefix(args[1], "relock_wait:")
	res := c.Client.Do(ctx, cmd)
	if lost {
		c.lost.Add(1)
		return connReset()
	}
	return res
}

// A wait whose registration's reply was lost takes its edge out when it
// ends all the same: left behind, the edge would make a waiter of a lock
// its owner still holds find a cycle that is not there.
func TestDeadlockEdgeOfLostReplyDeleted(t *testing.T) {
	e := onRedis(t)
	var lost atomic.Int32
	c1, err := reentrant.New(lostEdgeReply{e.rdb(t), &lost}, deadlockOpts)
	require.NoError(t, err)
	defer c1.Close()
	c2 := e.client(t)
	ha := holding(t, c1.Lock("x"))
	holding(t, c2.Lock("y"))

	// A second: the edge is registered once the wait has lasted 100ms,
	// and a busy machine may be slow to get there.
	_, ok, err := c1.Lock("y").TryLock(ha, reentrant.WaitAtMost(time.Second))
	require.NoError(t, err)
	require.False(t, ok)
	require.NotZero(t, lost.Load(), "the wait registered its edge")
	a, _ := reentrant.OwnerFrom(ha)
	edges, err := c2.WaitsFor(bg(), a.String())
	require.NoError(t, err)
	assert.Empty(t, edges, "a's ended wait is still registered, though a holds x")
}
