package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/reentrant"
)

// Run campaigns with value, runs fn while leading, and resigns when fn
// returns; when leadership is lost under fn (the leading context was
// cancelled with reentrant.ErrLockLost), it waits for fn to return and
// campaigns again, until ctx ends. It is the shape a service's main wants:
//
//	err := e.Run(ctx, hostname, func(leading context.Context, term election.Term) error {
//		return serve(leading, term) // return when leading is done
//	})
//
// It returns fn's error (with Resign's, if that failed) when fn returns
// while still leading; ctx's error when ctx ends; and Campaign's error when
// a campaign fails for another reason (a connection error that outlived
// Lock's own retries, ErrClosed). fn must return soon after its context
// is cancelled: the next campaign waits for it.
func (e *Election) Run(ctx context.Context, value string, fn func(leading context.Context, term Term) error) error {
	if fn == nil {
		return fmt.Errorf("relock: %w: Run with a nil func", reentrant.ErrInvalidArgument)
	}
	for {
		leading, term, err := e.Campaign(ctx, value)
		if err != nil {
			return err
		}
		ferr := fn(leading, term)
		lost := errors.Is(context.Cause(leading), reentrant.ErrLockLost)
		rerr := e.Resign(leading)
		if !lost {
			if errors.Is(rerr, reentrant.ErrLockLost) {
				rerr = nil // lost as fn returned: fn's answer stands
			}
			return errors.Join(ferr, rerr)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}
