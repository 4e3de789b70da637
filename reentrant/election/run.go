package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/reentrant"
)

// Run campaigns with value, runs fn while leading, and resigns when fn
// returns; when leadership is lost under fn (the leading context was
// cancelled with reentrant.ErrLockLost, or with reentrant.ErrStalled: a
// leader that stalls past Options.ProgressWithin has lost it too), it
// waits for fn to return and campaigns again, until ctx ends. When the
// leader is asked to resign (RequestResign), Run waits for fn to return,
// resigns as asked, and campaigns again, or, with Options.LeaveOnRequest,
// returns an error wrapping ErrResignRequested. It is the shape a
// service's main wants:
//
//	err := e.Run(ctx, hostname, func(leading context.Context, term election.Term) error {
//		return serve(leading, term) // return when leading is done
//	})
//
// It returns fn's error (with Resign's, if that failed) when fn returns
// while still leading; ctx's error when ctx ends, whatever fn returned
// then (nil included); and Campaign's error when a campaign fails for
// another reason (a connection error that outlived Lock's own retries,
// ErrClosed). fn must return soon after its context is cancelled: the
// next campaign waits for it. A panic in fn resigns, then goes on: a
// recovered panic leaves nobody leading for the whole life of the
// process.
func (e *Election) Run(ctx context.Context, value string, fn func(leading context.Context, term Term) error) error {
	if fn == nil {
		return fmt.Errorf("relock: %w: Run with a nil func", reentrant.ErrInvalidArgument)
	}
	for {
		leading, term, err := e.Campaign(ctx, value)
		if err != nil {
			return err
		}
		lost, err := e.lead(leading, term, fn)
		switch {
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			return err
		case ctx.Err() != nil:
			return errors.Join(err, context.Cause(ctx))
		case errors.Is(context.Cause(leading), ErrResignRequested) && e.leaveOnRequest:
			return errors.Join(err, context.Cause(leading))
		case !lost && !errors.Is(context.Cause(leading), ErrResignRequested):
			return err
		}
	}
}

// lead runs fn while leading, resigns, and reports whether leadership was
// lost under fn and what Run returns if it was not.
func (e *Election) lead(leading context.Context, term Term, fn func(context.Context, Term) error) (lost bool, err error) {
	returned := false
	defer func() {
		if !returned { // fn panicked: let the next candidate lead
			_ = e.Resign(leading)
		}
	}()
	ferr := fn(leading, term)
	returned = true
	lost = endedUnder(leading)
	rerr := e.Resign(leading)
	if lost || errors.Is(rerr, reentrant.ErrLockLost) || errors.Is(rerr, reentrant.ErrStalled) {
		rerr = nil // lost as fn returned: fn's answer stands
	}
	return lost, errors.Join(ferr, rerr)
}

// endedUnder reports whether leading's leadership ended without a Resign:
// lost, or given up when it stalled.
func endedUnder(leading context.Context) bool {
	cause := context.Cause(leading)
	return errors.Is(cause, reentrant.ErrLockLost) || errors.Is(cause, reentrant.ErrStalled)
}
