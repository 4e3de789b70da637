package scripts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// loneWires sends a client's calls: one made while the client has no other
// in flight goes on the lone wire, a connection of the client's own pool
// (Dedicate) that serves nothing else, on a ctx that rueidis runs
// synchronously, so that it never pipelines; the others go on the client's
// shared connections, as before.
//
// Why: rueidis runs a call on its caller's goroutine (one write, one read)
// only while the connection has never pipelined; two overlapping calls, or
// one on a ctx that can be cancelled and has no deadline, hand the
// connection to its pipelining goroutines for good. A service's client
// meets both within seconds of starting, and from then on a call made alone
// pays two goroutine hand-offs each way (docs/benchmarks.md, warm client).
// Concurrent calls are what pipelining (and the Coalescer) serve best: sent
// synchronously on wires of their own, 64 goroutines' pairs cost Redis a
// third more CPU each.
//
// A ctx that can end is heeded: ending, it closes the wire under the call,
// which then returns ctx's error, its outcome unknown (the script may have
// run), as a call cut short on a shared connection does.
type loneWires struct {
	client   rueidis.Client
	inflight atomic.Int32 // the client's calls in flight through do

	mu     sync.Mutex
	w      loneWire // the lone wire; only the call alone uses it
	using  bool     // a call is on w
	closed bool     // close ran: w is closed, or will be when its call ends
}

// loneWireAge is how long the lone wire serves before it is closed and
// another dedicated. rueidis pings an idle wire (ClientOption.Dialer.KeepAlive),
// and a call that meets that ping would make the wire pipeline: a wire's
// life is kept short, so that such a wire does not serve for long.
const loneWireAge = time.Minute

// loneWire is the dedicated connection, or none yet.
type loneWire struct {
	dc    rueidis.DedicatedClient
	born  time.Time
	cut   func()   // dc.Close, made once per connection, not per call
	uncut unCancel // the call's ctx without its cancellation, for rueidis
}

// unCancel is a ctx's values without its cancellation or deadline, which
// rueidis runs synchronously: context.WithoutCancel's, kept in its wire
// and used one call at a time, so that a call allocates none.
type unCancel struct{ context.Context }

func (unCancel) Deadline() (time.Time, bool) { return time.Time{}, false }
func (unCancel) Done() <-chan struct{}       { return nil }
func (unCancel) Err() error                  { return nil }

// newLoneWires returns how client's calls go, or nil when it is not one
// of rueidis's own standalone or sentinel clients: a cluster client
// dedicates a wire to one slot, and a client wrapped by the user (hooks,
// tracing, a test's faults) would see its Do bypassed.
func newLoneWires(client rueidis.Client) *loneWires {
	switch fmt.Sprintf("%T", client) {
	case "*rueidis.singleClient", "*rueidis.sentinelClient":
		return &loneWires{client: client}
	}
	return nil
}

// do sends cmd: on the lone wire if no other call is in flight, else on
// the client's shared connections.
func (lw *loneWires) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	defer lw.inflight.Add(-1)
	if lw.inflight.Add(1) == 1 {
		if r, ok := lw.alone(ctx, cmd); ok {
			return r
		}
	}
	return lw.client.Do(ctx, cmd)
}

// alone sends cmd on the lone wire, dedicated on first use, and reports
// false when Close ran, or the wire was found closed before cmd went out:
// cmd was not sent.
func (lw *loneWires) alone(ctx context.Context, cmd rueidis.Completed) (rueidis.RedisResult, bool) {
	lw.mu.Lock()
	if lw.closed {
		lw.mu.Unlock()
		return rueidis.RedisResult{}, false
	}
	lw.using = true
	lw.mu.Unlock()
	w := &lw.w
	if w.dc == nil {
		w.dc, _ = lw.client.Dedicate()
		w.born, w.cut = time.Now(), w.dc.Close
	}
	r, cut := w.run(ctx, cmd)
	err := r.NonRedisError()
	lw.mu.Lock()
	lw.using = false
	// A wire that broke, or that reaches a server which cannot run
	// scripts for now, is closed and another dedicated next time: after
	// a failover the client's pool is the new master's, and a wire kept
	// on the old one (demoted, not killed) would be refused forever.
	if cut || err != nil || IsUnavailable(r.Error()) || lw.closed || time.Since(w.born) > loneWireAge {
		w.dc.Close()
		w.dc = nil
	}
	lw.mu.Unlock()
	if errors.Is(err, rueidis.ErrClosing) || errors.Is(err, rueidis.ErrDedicatedClientRecycled) || !cut && dialFailed(err) {
		// The wire was closed before cmd was written, or never
		// connected: cmd was not sent, and goes on a shared connection.
		// (A dial another call began and whose ctx ended fails with that
		// ctx's error, "operation was canceled", though this call's ctx
		// cannot end.)
		return rueidis.RedisResult{}, false
	}
	return r, true
}

// run sends cmd and waits for its reply, or for ctx to end. rueidis runs a
// call synchronously when ctx has a deadline or cannot end; a ctx that can
// end without a deadline is passed on without its cancellation, which a
// close of the wire stands in for.
func (w *loneWire) run(ctx context.Context, cmd rueidis.Completed) (r rueidis.RedisResult, cut bool) {
	if ctx.Done() == nil {
		return w.dc.Do(ctx, cmd), false
	}
	if err := ctx.Err(); err != nil {
		return rueidis.NewErrorResult(err), false
	}
	sync := ctx
	if _, ok := ctx.Deadline(); !ok {
		w.uncut.Context = ctx
		defer func() { w.uncut.Context = nil }()
		sync = &w.uncut
	}
	stop := context.AfterFunc(ctx, w.cut)
	r = w.dc.Do(sync, cmd)
	if !stop() {
		return rueidis.NewErrorResult(ctx.Err()), true
	}
	return r, false
}

// close closes the lone wire, now or, if a call is on it, when that ends.
func (lw *loneWires) close() {
	if lw == nil {
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	if !lw.using && lw.w.dc != nil {
		lw.w.dc.Close()
		lw.w.dc = nil
	}
}
