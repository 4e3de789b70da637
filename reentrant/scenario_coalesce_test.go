package reentrant_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// Calls that many goroutines of one client make at once go to Redis as one
// script call (scripts.Coalescer). Its reply is every lock's reply in it:
// lost or late, each lock is handled as a call of its own would be. These
// tests make such a call for sure: Redis pauses writes while the first of
// 8 goroutines' acquires is in flight, so the other 7 queue behind it, and
// go as one call once writes resume.

// coalesced starts n goroutines that each take their own lock ("<name>:i")
// with ctxs[i], and returns their results; when coalesced returns, Redis's
// writes are paused, the first acquire of each line is in flight and the
// others queued behind it. resume lets the writes go. A ctx that cannot end
// sends an attempt unguarded, one that can a guarded one: two scripts, two
// lines; ctxs[0] cannot end, and ctxs[1], if any can, is the first that can.
func coalesced(t *testing.T, s *redistest.Server, c *reentrant.Client, name string, ctxs []context.Context) (results <-chan lockResult, resume func()) {
	t.Helper()
	lines := 1
	for i, ctx := range ctxs {
		if ctx.Done() != nil {
			require.Equal(t, 1, i, "the first ctx that can end")
			lines = 2
			break
		}
	}
	return coalescedCalls(t, s, len(ctxs), lines, func(i int) lockResult {
		held, err := c.Lock(fmt.Sprintf("%s:%d", name, i)).Lock(ctxs[i])
		return lockResult{i: i, held: held, err: err}
	})
}

// coalescedCalls runs call(i) on n goroutines, calls 0 to lines-1 first,
// each the first on its line, and returns their results; when it returns,
// Redis's writes are paused, the first calls are in flight and the others
// queued behind them. resume lets the writes go.
func coalescedCalls(t *testing.T, s *redistest.Server, n, lines int, call func(i int) lockResult) (results <-chan lockResult, resume func()) {
	t.Helper()
	require.NoError(t, s.Do("CLIENT", "PAUSE", "60000", "WRITE").Error())
	resume = func() { require.NoError(t, s.Do("CLIENT", "UNPAUSE").Error()) }
	t.Cleanup(func() { s.Do("CLIENT", "UNPAUSE") })
	out := make(chan lockResult, n)
	for i := range lines {
		go func() { out <- call(i) }()
	}
	inCoalescer := func(g [][]byte) bool { return bytes.Contains(bytes.Join(g, nil), []byte("internal/coalesce.(*Lines")) }
	redistest.Goroutines(t, "the first calls in flight", lines, inCoalescer)
	for i := lines; i < n; i++ {
		go func() { out <- call(i) }()
	}
	redistest.Goroutines(t, "the others queued behind them", n-lines, queued)
	return out, resume
}

// locksIn counts the locks named prefix<digit> that a write names: a call
// of one lock names it in several keys, a coalesced call names several.
func locksIn(b []byte, prefix string) int {
	seen := map[byte]bool{}
	for _, part := range bytes.Split(b, []byte(prefix))[1:] {
		if len(part) > 0 {
			seen[part[0]] = true
		}
	}
	return len(seen)
}

type lockResult struct {
	i    int
	held context.Context
	err  error
}

// queued says whether a goroutine's stack (a line each) is that of a call
// waiting in a coalescer's queue: in a select, in the coalescer's Do.
func queued(g [][]byte) bool {
	return len(g) > 1 && bytes.HasSuffix(g[0], []byte("[select]:")) && bytes.Contains(g[1], []byte("internal/coalesce.(*Lines"))
}

// An acquire whose reply is lost in a coalesced call is given back and
// tried again, as one sent alone: every goroutine ends up holding its lock
// once.
func TestLostCoalescedAcquireReply(t *testing.T) {
	s := redistest.Start(t)
	armed, lost := new(atomic.Int32), new(atomic.Int32)
	batch := func(b []byte) bool { return locksIn(b, "lost-batch:") >= 2 }
	c := wrappedClient(t, s, reentrant.Options{}, func(conn net.Conn) net.Conn {
		return &loseReplies{Conn: conn, armed: armed, match: batch, lost: func() { lost.Add(1) }}
	})
	ctxs := make([]context.Context, 8)
	for i := range ctxs {
		ctxs[i] = bg()
		if i%2 == 1 { // half on a ctx that can end: their attempts are guarded
			ctx, cancel := context.WithTimeout(bg(), time.Minute)
			t.Cleanup(cancel)
			ctxs[i] = ctx
		}
	}
	results, resume := coalesced(t, s, c, "lost-batch", ctxs)
	armed.Store(1)
	resume()
	held := make([]lockResult, len(ctxs))
	for range ctxs { // all first: an unlock meanwhile could lose its reply too
		r := <-results
		held[r.i] = r
	}
	for _, r := range held {
		require.NoError(t, r.err, "goroutine %d", r.i)
		fields, err := s.Do("HGETALL", fmt.Sprintf("lost-batch:%d", r.i)).AsStrMap()
		require.NoError(t, err)
		require.Len(t, fields, 1, "goroutine %d: one owner", r.i)
		for _, v := range fields {
			assert.Equal(t, "1", v, "goroutine %d: held once, not twice", r.i)
		}
		require.NoError(t, c.Lock(fmt.Sprintf("lost-batch:%d", r.i)).Unlock(r.held))
	}
	assert.EqualValues(t, 1, lost.Load(), "the coalesced call's reply was lost")
}

// A release whose reply is lost in a coalesced call is sent again with the
// same request id, alone, and its latch answers it: each goroutine gives
// back one hold, not two.
func TestLostCoalescedReleaseReply(t *testing.T) {
	s := redistest.Start(t)
	armed := new(atomic.Int32)
	c := wrappedClient(t, s, reentrant.Options{}, func(conn net.Conn) net.Conn {
		return &loseReplies{Conn: conn, armed: armed, match: func(b []byte) bool { return locksIn(b, "lost-release:") >= 2 }}
	})
	const n = 8
	outer, inner := make([]context.Context, n), make([]context.Context, n)
	for i := range n {
		var err error
		outer[i], err = c.Lock(fmt.Sprintf("lost-release:%d", i)).Lock(bg())
		require.NoError(t, err)
		inner[i], err = c.Lock(fmt.Sprintf("lost-release:%d", i)).Lock(outer[i])
		require.NoError(t, err)
	}
	results, resume := coalescedCalls(t, s, n, 1, func(i int) lockResult {
		return lockResult{i: i, err: c.Lock(fmt.Sprintf("lost-release:%d", i)).Unlock(inner[i])}
	})
	armed.Store(1)
	resume()
	for range n {
		r := <-results
		require.NoError(t, r.err, "goroutine %d: the retry is answered by the latch", r.i)
	}
	assert.Zero(t, armed.Load(), "the coalesced call's reply was lost")
	for i := range n {
		held, err := c.Lock(fmt.Sprintf("lost-release:%d", i)).HoldCount(outer[i])
		require.NoError(t, err)
		assert.Equal(t, 1, held, "lock %d: one hold given back, not two", i)
		require.NoError(t, c.Lock(fmt.Sprintf("lost-release:%d", i)).Unlock(outer[i]))
	}
}

// Callers whose ctx ends while their coalesced acquire is in flight, its
// reply late, return at once; what the call took for them is given back
// (their attempts were guarded), and no lock is left held.
func TestLateCoalescedAcquireReply(t *testing.T) {
	s := redistest.Start(t)
	armed := new(atomic.Int32)
	var meanwhile func()
	c := wrappedClient(t, s, reentrant.Options{}, func(conn net.Conn) net.Conn {
		return &lateReplies{Conn: conn, armed: armed, match: func(b []byte) bool { return locksIn(b, "late-batch:") >= 2 }, meanwhile: func() { meanwhile() }}
	})
	ctxs := make([]context.Context, 8)
	ctxs[0] = bg()
	cancel := make([]context.CancelFunc, len(ctxs))
	for i := 1; i < len(ctxs); i++ {
		ctxs[i], cancel[i] = context.WithCancel(bg())
		t.Cleanup(cancel[i])
	}
	results, resume := coalesced(t, s, c, "late-batch", ctxs)
	// The first acquire of each line went alone, answered on time; the
	// other 6 went as one call, whose reply is held back while...
	const inBatch = 6
	var cut, took []lockResult
	heldBack := make(chan struct{})
	meanwhile = func() {
		for i := 2; i < len(ctxs); i++ { // (0 and 1 went alone)
			cancel[i]() // ...every caller's ctx ends, and they return
		}
		for len(cut) < inBatch {
			r := <-results
			if r.err == nil {
				took = append(took, r) // unlocked below: this goroutine reads replies
				continue
			}
			cut = append(cut, r)
		}
		close(heldBack)
	}
	armed.Store(1)
	resume()
	select {
	case <-heldBack:
	case <-time.After(time.Minute):
		t.Fatal("the coalesced call's reply was not held back")
	}
	for _, r := range cut {
		require.ErrorIs(t, r.err, context.Canceled, "goroutine %d", r.i)
	}
	for len(cut)+len(took) < len(ctxs) { // the lone calls' results
		r := <-results
		require.NoError(t, r.err, "goroutine %d, which went alone", r.i)
		took = append(took, r)
	}
	for _, r := range took {
		require.NoError(t, c.Lock(fmt.Sprintf("late-batch:%d", r.i)).Unlock(r.held))
	}
	redistest.Eventually(t, 10*time.Second, "every lock the late call took is given back", func() bool {
		n, err := s.Do("EXISTS", "late-batch:0", "late-batch:1", "late-batch:2", "late-batch:3", "late-batch:4", "late-batch:5", "late-batch:6", "late-batch:7").AsInt64()
		return err == nil && n == 0
	})
}
