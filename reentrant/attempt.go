package reentrant

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// errAbandoned marks an attempt that the caller's ctx cut short while its
// script was in flight: its outcome is not lost, it is undone in the
// background once its reply comes (see attemptOnce).
var errAbandoned = errors.New("the attempt's reply is awaited in the background")

// cuttable is one acquire attempt that ctx may cut short: run sends its script, and undo undoes
// exactly what a run that the caller gave up on did, given its result.
type cuttable[R any] interface {
	run(ctx context.Context) R
	undo(ctx context.Context, r R)
}

// attemptOnce runs one acquire attempt, a, so that its outcome is never
// lost to the caller's ctx, and reports whether the caller gave up on it.
//
// Why: an undo sent after an attempt that ctx cut short could reach Redis
// before the attempt itself. rueidis spreads a client's commands over
// several connections (ClientOption.PipelineMultiplex; two or more on any
// machine with more than one core), and nothing orders two connections: a
// release or a fair queue's leave, sent at once, may run first, and the
// late attempt then takes the lock or joins the queue for an owner that
// nobody will renew, release or take out. Everyone then waits out that
// hold's lease, or that ghost waiter's whole turn at the head of the queue.
//
// So the script runs on a worker (see Client.hand) with the client's ctx,
// which only Close ends, not the caller's. If ctx ends first, attemptOnce
// returns at once with abandoned set, and the worker, once the reply
// comes, hands the result to undo. (A ctx that can never end needs none of
// this: the caller runs the script itself.)
func attemptOnce[R any, A cuttable[R]](c *Client, ctx context.Context, a A) (r R, abandoned bool) {
	j := &attemptJob[R, A]{a: a, ctx: ctx, done: make(chan struct{})}
	if !c.hand(j) {
		return a.run(ctx), false // closed: the script meets ErrClosed
	}
	select {
	case <-j.done:
		return j.r, false
	case <-ctx.Done():
	}
	if !j.state.CompareAndSwap(attemptRunning, attemptAbandoned) {
		<-j.done // answered as ctx ended: the answer stands
		return j.r, false
	}
	return r, true
}

// attemptJob is attemptOnce's attempt on a worker. state settles, once,
// who owns the result: the caller (answered) or the worker (abandoned).
type attemptJob[R any, A cuttable[R]] struct {
	a     A
	ctx   context.Context // the caller's: an undo keeps its values
	r     R               // written before done is closed
	state atomic.Int32
	done  chan struct{}
}

const (
	attemptRunning int32 = iota
	attemptAnswered
	attemptAbandoned
)

func (j *attemptJob[R, A]) do(c *Client) {
	j.r = j.a.run(c.closing)
	if j.state.CompareAndSwap(attemptRunning, attemptAnswered) {
		close(j.done)
		return
	}
	ctx, cancel := cleanup(j.ctx)
	defer cancel()
	defer context.AfterFunc(c.closing, cancel)()
	j.a.undo(ctx, j.r)
}

// funcAttempt is a cuttable made of two funcs.
type funcAttempt[R any] struct {
	runFn  func(context.Context) R
	undoFn func(context.Context, R)
}

func (f funcAttempt[R]) run(ctx context.Context) R     { return f.runFn(ctx) }
func (f funcAttempt[R]) undo(ctx context.Context, r R) { f.undoFn(ctx, r) }

// job is what a worker runs (see Client.hand).
type job interface{ do(c *Client) }

// hand runs j on a worker: one waiting for work, else a new one. It
// reports false after Close. Workers outlive their jobs, up to
// maxIdleWorkers of them: a goroutine started for each attempt cost
// allocations (24 per pair against 20) and a new stack grown for every
// script call (64 goroutines on a cancellable ctx: 0.93x the time per
// pair with kept workers; docs/benchmarks.md).
func (c *Client) hand(j job) bool {
	select {
	case c.idle <- j:
		return true
	default:
		return c.background(func() { c.work(j) })
	}
}

// work runs j, then the jobs handed to it while it waits, until Close or
// until maxIdleWorkers others already wait.
func (c *Client) work(j job) {
	for {
		j.do(c)
		if c.idleWorkers.Add(1) > maxIdleWorkers {
			c.idleWorkers.Add(-1)
			return
		}
		select {
		case j = <-c.idle:
			c.idleWorkers.Add(-1)
		case <-c.done:
			return
		}
	}
}

// maxIdleWorkers bounds the workers kept waiting: as many as attempts a
// busy client has in flight at once, a few hundred KB of stacks.
const maxIdleWorkers = 64

// abandonedError is the error of an attempt that ctx cut short.
func abandonedError(ctx context.Context) error {
	return fmt.Errorf("%w (%w)", context.Cause(ctx), errAbandoned)
}
