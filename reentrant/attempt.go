package reentrant

import (
	"context"
	"errors"
	"fmt"
)

// errAbandoned marks an attempt that the caller's ctx cut short while its
// script was in flight: its outcome is not lost, it is undone in the
// background once its reply comes (see attemptOnce).
var errAbandoned = errors.New("the attempt's reply is awaited in the background")

// attemptOnce runs one acquire script, run, so that its outcome is never
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
// So run gets the client's ctx, which only Close ends, not the caller's. If
// ctx ends first, attemptOnce returns at once with abandoned set, and a
// background task waits for run's result and hands it to undo, which can
// undo exactly what the attempt did. (A ctx that can never end needs none
// of this: the caller runs the script itself.)
func attemptOnce[R any](c *Client, ctx context.Context, run func(context.Context) R, undo func(context.Context, R)) (r R, abandoned bool) {
	done := make(chan R, 1)
	if !c.background(func() { done <- run(c.closing) }) {
		return run(ctx), false // closed: the script meets ErrClosed
	}
	select {
	case r = <-done:
		return r, false
	case <-ctx.Done():
	}
	c.background(func() {
		r := <-done
		ctx, cancel := cleanup(ctx)
		defer cancel()
		defer context.AfterFunc(c.closing, cancel)()
		undo(ctx, r)
	})
	return r, true
}

// abandonedError is the error of an attempt that ctx cut short.
func abandonedError(ctx context.Context) error {
	return fmt.Errorf("%w (%w)", context.Cause(ctx), errAbandoned)
}
