package scripts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// loneWires serve the calls that find one free: a few connections of the
// client's own pool (Dedicate), each serving one call at a time, on a ctx
// that rueidis runs synchronously, so that they never pipeline.
//
// Why: rueidis runs a call on its caller's goroutine (one write, one read)
// only while the connection has never pipelined; two overlapping calls, or
// one on a ctx that can be cancelled and has no deadline, hand the
// connection to its pipelining goroutines for good. A service's client
// meets both within seconds of starting, and from then on a call made alone
// pays two goroutine hand-offs each way (docs/benchmarks.md, warm client).
// A crowd still goes through the shared connections: a call that finds no
// lone wire free takes them, and pipelining (and the Coalescer) is what
// serves it.
//
// A ctx that can end is heeded: ending, it closes the wire under the call,
// which then returns ctx's error at once, its outcome unknown (the script
// may have run), as a call cut short on a shared connection does.
type loneWires struct {
	client rueidis.Client
	mu     sync.Mutex
	idle   []*loneWire
	made   int  // wires handed out or idle, at most loneWireCount
	closed bool // Close ran: wires coming back are given back to rueidis
}

// loneWireCount bounds a client's lone wires: about as many as calls a
// service makes alone at once. More calls at once are a crowd, which the
// shared connections serve better.
const loneWireCount = 4

// loneWireAge is how long a wire serves before it is given back and another
// taken. rueidis pings an idle wire (ClientOption.Dialer.KeepAlive), and a
// call that meets that ping would make the wire pipeline: a wire's life is
// kept short, so that such a wire does not serve for long.
const loneWireAge = time.Minute

// loneWire is one dedicated connection, or none yet.
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

// newLoneWires returns the lone wires of client, or nil when it is not one
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

// do runs cmd on a lone wire, and reports false when none was free, or the
// one taken was found closed before cmd went out: cmd was not sent, and
// goes on the shared connections.
func (lw *loneWires) do(ctx context.Context, cmd rueidis.Completed) (rueidis.RedisResult, bool) {
	w := lw.take()
	if w == nil {
		return rueidis.RedisResult{}, false
	}
	if w.dc == nil {
		w.dc, _ = lw.client.Dedicate()
		w.born, w.cut = time.Now(), w.dc.Close
	}
	r, cut := w.run(ctx, cmd)
	err := r.NonRedisError()
	if cut || err != nil || time.Since(w.born) > loneWireAge {
		w.dc.Close() // closed or broken, or old: never used again
		w.dc = nil
	}
	lw.put(w)
	if errors.Is(err, rueidis.ErrClosing) || errors.Is(err, rueidis.ErrDedicatedClientRecycled) {
		return rueidis.RedisResult{}, false // the wire was closed before cmd was written
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

// take returns a free wire, made on first use, or nil when every wire is
// busy or Close ran.
func (lw *loneWires) take() *loneWire {
	if lw == nil {
		return nil
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if n := len(lw.idle); n > 0 {
		w := lw.idle[n-1]
		lw.idle = lw.idle[:n-1]
		return w
	}
	if lw.closed || lw.made == loneWireCount {
		return nil
	}
	lw.made++
	return &loneWire{}
}

// put makes w free again; after Close, it gives w's connection back.
func (lw *loneWires) put(w *loneWire) {
	lw.mu.Lock()
	closed := lw.closed
	if !closed {
		lw.idle = append(lw.idle, w)
	}
	lw.mu.Unlock()
	if closed && w.dc != nil {
		w.dc.Close()
	}
}

// close gives the idle wires' connections back (closed: rueidis's pool
// would keep them, one at a time, for its blocking commands); a wire in use
// is given back when its call ends.
func (lw *loneWires) close() {
	if lw == nil {
		return
	}
	lw.mu.Lock()
	idle := lw.idle
	lw.idle, lw.closed = nil, true
	lw.mu.Unlock()
	for _, w := range idle {
		if w.dc != nil {
			w.dc.Close()
		}
	}
}
