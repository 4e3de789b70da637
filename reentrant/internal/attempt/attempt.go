// Package attempt runs acquire attempts so that the caller's ctx may give
// up on one without its outcome being lost.
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
// So the script runs on a worker with the client's ctx, which only the
// client's Close ends, not the caller's. If the caller's ctx ends first,
// Once returns at once with abandoned set, and the worker, once the reply
// comes, hands the result to the attempt's Undo. (A ctx that can never end
// needs none of this: the caller runs the script itself.)
package attempt

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrAbandoned marks an attempt that the caller's ctx cut short while its
// script was in flight: its outcome is not lost, it is undone in the
// background once its reply comes.
var ErrAbandoned = errors.New("the attempt's reply is awaited in the background")

// Abandoned is the error of an attempt that ctx cut short: ctx's cause,
// and ErrAbandoned.
func Abandoned(ctx context.Context) error {
	return fmt.Errorf("%w (%w)", context.Cause(ctx), ErrAbandoned)
}

// Cuttable is one acquire attempt that a ctx may cut short: Run sends its
// script, and Undo undoes exactly what a run that the caller gave up on
// did, given its result.
type Cuttable[R any] interface {
	Run(ctx context.Context) R
	Undo(ctx context.Context, r R)
}

// Funcs is a Cuttable made of two funcs.
type Funcs[R any] struct {
	RunFn  func(context.Context) R
	UndoFn func(context.Context, R)
}

func (f Funcs[R]) Run(ctx context.Context) R     { return f.RunFn(ctx) }
func (f Funcs[R]) Undo(ctx context.Context, r R) { f.UndoFn(ctx, r) }

// Workers run attempts on goroutines kept between them. Workers outlive
// their jobs, up to maxIdle of them: a goroutine started for each attempt
// cost allocations (24 per pair against 20) and a new stack grown for
// every script call (64 goroutines on a cancellable ctx: 0.93x the time
// per pair with kept workers; docs/benchmarks.md).
type Workers struct {
	closing context.Context   // the client's: ends with its Close
	start   func(func()) bool // starts a goroutine the client's Close waits for; false after Close
	undoFor time.Duration     // how long an undo may take
	idle    chan job          // hands jobs to the workers waiting for one
	waiting atomic.Int32      // how many wait
}

// maxIdle bounds the workers kept waiting: as many as attempts a busy
// client has in flight at once, a few hundred KB of stacks.
const maxIdle = 64

// New returns the workers of a client whose Close ends closing; start runs
// a goroutine that Close waits for, and reports false after Close. An undo
// is given undoFor, with the caller's ctx's values.
func New(closing context.Context, start func(func()) bool, undoFor time.Duration) *Workers {
	return &Workers{closing: closing, start: start, undoFor: undoFor, idle: make(chan job)}
}

// job is what a worker runs.
type job interface{ do(w *Workers) }

// Once runs one attempt, a, so that its outcome is never lost to the
// caller's ctx, and reports whether the caller gave up on it: then r is
// the zero value, and the worker undoes what a did once its reply comes.
func Once[R any, A Cuttable[R]](w *Workers, ctx context.Context, a A) (r R, gaveUp bool) {
	j := &onceJob[R, A]{a: a, ctx: ctx, done: make(chan struct{})}
	if !w.hand(j) {
		return a.Run(ctx), false // closed: the script meets the closed client
	}
	select {
	case <-j.done:
		return j.r, false
	case <-ctx.Done():
	}
	if !j.state.CompareAndSwap(running, abandoned) {
		<-j.done // answered as ctx ended: the answer stands
		return j.r, false
	}
	return r, true
}

// onceJob is Once's attempt on a worker. state settles, once, who owns the
// result: the caller (answered) or the worker (abandoned).
type onceJob[R any, A Cuttable[R]] struct {
	a     A
	ctx   context.Context // the caller's: an undo keeps its values
	r     R               // written before done is closed
	state atomic.Int32
	done  chan struct{}
}

const (
	running int32 = iota
	answered
	abandoned
)

func (j *onceJob[R, A]) do(w *Workers) {
	j.r = j.a.Run(w.closing)
	if j.state.CompareAndSwap(running, answered) {
		close(j.done)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), w.undoFor)
	defer cancel()
	defer context.AfterFunc(w.closing, cancel)()
	j.a.Undo(ctx, j.r)
}

// hand runs j on a worker: one waiting for work, else a new one. It
// reports false after the client's Close.
func (w *Workers) hand(j job) bool {
	select {
	case w.idle <- j:
		return true
	default:
		return w.start(func() { w.work(j) })
	}
}

// work runs j, then the jobs handed to it while it waits, until Close or
// until maxIdle others already wait.
func (w *Workers) work(j job) {
	for {
		j.do(w)
		if w.waiting.Add(1) > maxIdle {
			w.waiting.Add(-1)
			return
		}
		select {
		case j = <-w.idle:
			w.waiting.Add(-1)
		case <-w.closing.Done():
			return
		}
	}
}
