package reentrant_test

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// edgeOf returns the key of held's owner's registered wait.
func edgeOf(held context.Context) string {
	o, _ := reentrant.OwnerFrom(held)
	return scripts.WaitEdgeKey(o.String())
}

// In a cycle of three owners whose waits began one after another, the
// youngest wait is the victim (docs/deadlocks.md: the one that has waited
// least loses least): the third gets ErrDeadlock, the first two go on
// waiting, and take their locks once it gives its own back.
func TestDeadlockVictimIsYoungest(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, deadlockOpts)
	a, b, cc := holding(t, c.Lock("vx")), holding(t, c.Lock("vy")), holding(t, c.Lock("vz"))
	results := map[string]chan error{"first": make(chan error, 1), "second": make(chan error, 1), "third": make(chan error, 1)}
	wait := func(who string, held context.Context, lock, own string) {
		go func() {
			h, err := c.Lock(lock).Lock(held, reentrant.WaitAtMost(time.Minute))
			if err == nil {
				err = c.Lock(lock).Unlock(h)
			}
			assert.NoError(t, c.Lock(own).Unlock(held), "%s gives back what it held", who)
			results[who] <- err
		}()
	}
	// first: a waits for vy (b's); second: b for vz (cc's); third: cc for
	// vx (a's), which closes the cycle. Each starts once the one before it
	// has registered its wait, so their order is known.
	wait("first", a, "vy", "vx")
	eventually(t, "the first wait registered", func() bool { return e.int(t, "EXISTS", edgeOf(a)) == 1 })
	wait("second", b, "vz", "vy")
	eventually(t, "the second wait registered", func() bool { return e.int(t, "EXISTS", edgeOf(b)) == 1 })
	wait("third", cc, "vx", "vz")

	select {
	case err := <-results["third"]:
		assert.ErrorIs(t, err, reentrant.ErrDeadlock, "the youngest wait is the victim")
	case err := <-results["first"]:
		t.Fatalf("the oldest wait ended first: %v", err)
	case err := <-results["second"]:
		t.Fatalf("the middle wait ended first: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no victim")
	}
	for _, who := range []string{"second", "first"} {
		select {
		case err := <-results[who]:
			assert.NoError(t, err, "%s takes its lock once the victim gave its own back", who)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s still waits", who)
		}
	}
}

// readsThenBreaks passes calls on, and once it has passed the first GET of
// key it deletes key behind the caller's back: the wait it records ended
// between detection's reading of the graph and its verdict.
type readsThenBreaks struct {
	rueidis.Client
	key   string
	admin func()
	done  atomic.Bool
}

func (r *readsThenBreaks) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	args := cmd.Commands() // read before Do, which recycles cmd and its args
	read := len(args) == 2 && args[0] == "GET" && args[1] == r.key
	res := r.Client.Do(ctx, cmd)
	if read && r.done.CompareAndSwap(false, true) {
		r.admin()
	}
	return res
}

// A cycle seen in one read of the waits-for graph that broke before the
// verdict (the other owner's wait was served, or given up, in between) is
// no deadlock: detection reads the cycle's edges again, and the wait goes
// on (docs/deadlocks.md promises no false positives). Owner b, written
// raw as another process leaves it, holds lock ry and waits for rx, which
// a holds; a waits for ry, and b's wait ends just after a's check read it.
func TestDeadlockBrokenBeforeVerdict(t *testing.T) {
	e := onRedis(t)
	b := "6ba7b812-9dad-11d1-80b4-00c04fd430c8:1"
	bEdge := scripts.WaitEdgeKey(b)
	broken := &readsThenBreaks{Client: e.rdb(t), key: bEdge, admin: func() { e.do(t, "DEL", bEdge) }}
	c, err := reentrant.New(broken, reentrant.Options{DeadlockTimeout: 100 * time.Millisecond, RepollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	a := holding(t, c.Lock("rx"))
	for _, cmd := range [][]string{{"HSET", "ry", b, "1"}, {"PEXPIRE", "ry", "600000"},
		// b has waited a minute: a's wait is the younger, so a would be
		// the victim of a cycle.
		{"SET", bEdge, strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10) + ":rx", "PX", "600000"}} {
		require.NoError(t, e.do(t, cmd...).Error())
	}
	_, err = c.Lock("ry").Lock(a, reentrant.WaitAtMost(time.Second))
	assert.True(t, broken.done.Load(), "detection read b's wait: %v", err)
	assert.NotErrorIs(t, err, reentrant.ErrDeadlock, "the cycle had broken before the verdict")
	assert.ErrorIs(t, err, reentrant.ErrNotAcquired, "ry stays held; the wait ran out")
	require.NoError(t, c.Lock("rx").Unlock(a))
}

// dies passes calls on until killed; then every call fails as if the
// process were gone, so nothing it registered is cleaned up.
type dies struct {
	rueidis.Client
	dead atomic.Bool
}

func (d *dies) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if d.dead.Load() {
		return rueidis.NewErrorResult(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	}
	return d.Client.Do(ctx, cmd)
}

func (d *dies) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if d.dead.Load() {
		rs := make([]rueidis.RedisResult, len(cmds))
		for i := range rs {
			rs[i] = d.Do(ctx, cmds[i])
		}
		return rs
	}
	return d.Client.DoMulti(ctx, cmds...)
}

// A waiter whose process died leaves its waits-for edge behind; the edge
// expires (two re-polls and a second after its last check, here 1.2 s),
// and a later wait on the lock the dead process still holds (taken for an
// hour) is a long wait, not a deadlock with a dead process.
func TestDeadlockEdgeOfDeadWaiterExpires(t *testing.T) {
	e := onRedis(t)
	opts := reentrant.Options{DeadlockTimeout: 100 * time.Millisecond, RepollInterval: 100 * time.Millisecond}
	doomed := &dies{Client: e.rdb(t)}
	w, err := reentrant.New(doomed, opts)
	require.NoError(t, err)
	defer w.Close()
	c := e.client(t, opts)

	wHeld, err := w.Lock("dx").Lock(bg(), reentrant.LeaseFor(time.Hour))
	require.NoError(t, err)
	aHeld := holding(t, c.Lock("dy"))
	waitCtx, stopWaiting := context.WithCancel(wHeld)
	waited := make(chan error, 1)
	go func() {
		_, err := w.Lock("dy").Lock(waitCtx)
		waited <- err
	}()
	eventually(t, "the dead-to-be waiter's edge", func() bool { return e.int(t, "EXISTS", edgeOf(wHeld)) == 1 })
	doomed.dead.Store(true)
	stopWaiting()
	select {
	case <-waited: // its edge stays: the DEL that would take it out fails
	case <-time.After(10 * time.Second):
		t.Fatal("the dead waiter's Lock did not end with its ctx")
	}

	start := time.Now()
	eventually(t, "the dead waiter's edge to expire", func() bool { return e.int(t, "EXISTS", edgeOf(wHeld)) == 0 })
	t.Logf("the edge expired %v after its process died", time.Since(start).Round(time.Millisecond))
	_, err = c.Lock("dx").Lock(aHeld, reentrant.WaitAtMost(time.Second))
	assert.NotErrorIs(t, err, reentrant.ErrDeadlock, "no cycle with a dead process")
	assert.ErrorIs(t, err, reentrant.ErrNotAcquired, "dx is held for an hour by the dead process")
	require.NoError(t, c.Lock("dy").Unlock(aHeld))
}
