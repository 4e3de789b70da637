package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/internal/errtext"
)

// ErrLeadershipLost is what Run returns when leadership was lost under fn
// (the watchdog could not renew it, or it stalled): a controller's main
// exits on it, as one whose client-go elector stopped leading does, and is
// restarted to campaign again with a fresh manager.
var ErrLeadershipLost = errors.New("leadership lost")

// RunOptions set how Run campaigns. The zero RunOptions are the defaults.
type RunOptions struct {
	// Recampaign, when set, runs election.Run instead: it campaigns again
	// after the watchdog lost leadership under fn, instead of returning
	// ErrLeadershipLost. For an fn that can run more than once (a
	// controller-runtime manager cannot be started twice).
	Recampaign bool
}

// Run runs fn only while this process leads the election e, with value as
// its identity, the way a controller's main runs its manager:
//
//	err := kube.Run(ctx, e, podName, func(leading context.Context, term election.Term) error {
//		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
//			BaseContext: func() context.Context { return leading },
//		})
//		if err != nil {
//			return err
//		}
//		// ... set up controllers ...
//		return mgr.Start(leading)
//	}, kube.RunOptions{})
//
// It campaigns (blocking until this process leads, or ctx ends), then runs
// fn with the leading context, which is cancelled the moment leadership may
// be lost: its cause is reentrant.ErrLockLost (the watchdog could not renew
// it in time) or reentrant.ErrStalled (election.Options.ProgressWithin). fn
// and the code it starts can read the term with reentrant.TokenFrom from
// any context made from leading, to fence their writes (election.Fenced).
// A controller-runtime manager gives its controllers contexts made from
// Options.BaseContext, not from Start's: make the manager in fn, with a
// BaseContext that returns leading, so that its reconcilers can. (A
// manager cannot be started twice, so it is made in fn anyway.)
//
// When fn returns while still leading, Run resigns, so that the next
// candidate leads within milliseconds, and returns fn's error. When ctx
// ends, it returns ctx's cause once fn has returned. When leadership was
// lost under fn, it returns an error wrapping ErrLeadershipLost and the
// cause once fn has returned, or, with Recampaign, campaigns again. A panic
// in fn resigns, then goes on.
func Run(ctx context.Context, e *election.Election, value string, fn func(leading context.Context, term election.Term) error, opts RunOptions) error {
	switch {
	case fn == nil:
		return fmt.Errorf("relock: %w: Run with a nil func", reentrant.ErrInvalidArgument)
	case ctx == nil:
		return fmt.Errorf("relock: %w: Run with a nil context", reentrant.ErrInvalidArgument)
	}
	if opts.Recampaign {
		return e.Run(ctx, value, fn)
	}
	// election.Run campaigns again after a loss: stopping its ctx as fn
	// returns from one ends it there instead.
	run, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var lost, ferr error
	err := e.Run(run, value, func(leading context.Context, term election.Term) error {
		err := fn(leading, term)
		if cause := context.Cause(leading); ctx.Err() == nil && (errors.Is(cause, reentrant.ErrLockLost) || errors.Is(cause, reentrant.ErrStalled)) {
			lost, ferr = cause, err
			stop(errStopped)
		}
		return err
	})
	if lost == nil {
		return err
	}
	return errors.Join(errtext.Wrap(fmt.Sprintf("relock: election %q", e.Name()), &leadershipLost{lost}), ferr)
}

// errStopped ends election.Run after a loss; Run reports the loss instead.
var errStopped = errors.New("relock: leadership lost: not campaigning again")

// leadershipLost is ErrLeadershipLost with its cause, saying "relock: "
// once.
type leadershipLost struct{ cause error }

func (l *leadershipLost) Error() string {
	return ErrLeadershipLost.Error() + ": " + strings.TrimPrefix(l.cause.Error(), "relock: ")
}
func (l *leadershipLost) Unwrap() []error { return []error{ErrLeadershipLost, l.cause} }
