package reentrant

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/scripts"
)

// The acquire loop: every blocking call (each lock kind, both semaphores,
// the latch, the rate limiter) runs attempts through run below, and differs
// only in its attempter and its retryPolicy. Redlock and MultiLock are
// built on Lock calls and wait on their own terms (a quorum of masters; a
// round over the locks in order), so they do not run it directly.
//
// Where the rest is: the wait between attempts (subscriptions, sleeps,
// the wait limit) in wait.go; a lock's attempter in cycle.go, and what
// differs between lock kinds in kind.go; the holds taken and their
// renewal in holds.go; giving a hold back in release.go; an attempt the
// caller's ctx cut short in attempt.go.

// retryPolicy says what a failed attempt allows, by what the attempt does
// and what its owner can undo.
type retryPolicy uint8

const (
	// sendOnce: the attempt changes something nobody owns (a semaphore's
	// count, a rate limiter's window, a lock for an owner the caller gave,
	// which may hold it elsewhere too). A reply lost with its connection
	// may hide a change nothing can tell from anyone else's, so the
	// attempt is sent again only when it surely did not run (notRun).
	sendOnce retryPolicy = iota
	// readOnly: the attempt changes nothing (a latch's count), so it is
	// sent again after any failure to reach Redis.
	readOnly
	// undoable: the attempt takes what only this call can have (a lock
	// for an owner made for the call; a permit by the id it drew). What a
	// lost reply may have taken is given back (attempter.undo), and once
	// Redis has answered that, the call goes on.
	undoable
	// claims: as undoable, but while the call waits, its next attempt
	// takes what a lost one took, instead of giving it back: a fair lock's
	// waiter that takes grants (see queued). A release may have
	// given it the lock after its lost attempt ran; given back, the lock
	// would go to the next waiter, and this one would queue again at the
	// end.
	claims
)

// An attempter is one blocking call's side of the acquire loop.
type attempter interface {
	// try sends attempt number n (from 0).
	try(n int) outcome
	// sleep bounds the pause after outcome o: the thing was taken by
	// someone else, or (o.taken) the hold o took had expired before its
	// reply came, so that the thing was found free.
	sleepAfter(o outcome) time.Duration
	// keep makes what a successful attempt took the caller's (records a
	// hold, confirms replica sync) and returns nil, or the call's error.
	// errHoldExpired and errLateReply say the hold was not kept (see
	// holdTable.keep); the loop then goes on as after a lost reply, or,
	// when the hold had expired, as after an attempt that found the thing
	// free.
	keep(o outcome) error
	// undo gives back what an attempt whose reply was lost may have taken
	// (undoable only), and returns Redis's error; try numbers the tries
	// for one lost attempt, from 0.
	undo(ctx context.Context, try int) error
}

// keepsNothing is the keep and undo of an attempter whose success needs
// nothing recorded and whose attempts are not undoable.
type keepsNothing struct{}

func (keepsNothing) keep(outcome) error              { return nil }
func (keepsNothing) undo(context.Context, int) error { return nil }

// An outcome is what one attempt did.
type outcome struct {
	err   error // nil: Redis answered
	taken bool  // it took the thing waited for (err: a replica sync error)
	// bound, when the thing was taken by someone else: how long it stays
	// so at most (a lock's PTTL, a rate limiter's wait), or -1.
	bound time.Duration
	// abandoned: ctx cut it short; it is undone in the background (see
	// attempt.Once).
	abandoned bool
	// final, when not nil, ends the call with this error: the attempt
	// found the thing taken, and the wait must not go on (a deadlock).
	final error
}

// run is the acquire loop. Each turn sends one attempt and either ends the
// call (what it waited for is the caller's, or an error) or pauses before
// the next: until a wake-up, the outcome's bound, the re-poll interval, the
// wait limit, ctx or Close (see waiting.pause); or, after an attempt that
// failed for want of Redis, a backoff. It returns the call's result; the
// caller ends the wait with it (waiting.end).
//
// It never sends after ctx ended: such an attempt could win after the
// caller gave up, and hand a hold to nobody.
func (w *waiting) run(a attempter, policy retryPolicy, cfg acquireConfig) error {
	for attempt := 0; ; attempt++ {
		if w.ctx.Err() != nil {
			return waitError(w.ctx, w.name)
		}
		o := a.try(attempt)
		w.heard(o.err)
		if o.final != nil {
			return o.final
		}
		var err error
		switch {
		case o.taken:
			if err = a.keep(o); !errors.Is(err, errLateReply) && !errors.Is(err, errHoldExpired) {
				return err // nil: the caller's
			}
			err = w.late(a, policy, cfg, attempt, o, err)
		case o.err != nil:
			err = w.failed(a, policy, cfg, attempt, o, o.err)
		default:
			err = w.pause(attempt, func() time.Duration { return a.sleepAfter(o) })
		}
		if err != nil {
			return err
		}
	}
}

// late handles an attempt whose hold keep did not keep, and returns nil
// when the call goes on. If it had expired
// and the call waits, the wait goes on as after an attempt that found the
// thing free: the next attempt comes with the outcome's sleep (at once for
// most), since the hold ended with no release to wake anyone. Otherwise it
// is handled as an attempt whose reply was lost.
func (w *waiting) late(a attempter, policy retryPolicy, cfg acquireConfig, n int, o outcome, err error) error {
	expired := errors.Is(err, errHoldExpired)
	if expired && cfg.mayRetry(n) {
		return w.pause(n, func() time.Duration { return a.sleepAfter(o) })
	}
	if !expired {
		w.unreachable = err // Redis did not confirm in time: a wait that ends now says so
	}
	return w.failed(a, policy, cfg, n, o, err)
}

// failed handles an attempt that ended in err, and returns nil when the
// call goes on.
//   - ctx ended: an undoable attempt whose reply was lost is undone once
//     (one cut short by ctx is undone in the background; see attempt.Once).
//   - The server cannot run scripts for now, or could not be dialled: the
//     attempt did not run; back off and go on.
//   - The reply was lost (the connection broke, or came too late to keep
//     the hold), for an undoable attempt: what it may have taken is given
//     back (undoLost), and the call goes on, or returns the error when it
//     would not wait; for a read, or a claiming attempt whose call waits,
//     the call backs off and goes on.
//   - Anything else (WRONGTYPE, a bad ACL, a closed client, a lost reply of
//     a change sent once) is returned.
func (w *waiting) failed(a attempter, policy retryPolicy, cfg acquireConfig, n int, o outcome, err error) error {
	if w.ctx.Err() != nil {
		if policy >= undoable && !o.abandoned && w.lost(err) {
			// Once, at once: if it fails, the TTL ends the hold.
			ctx, cancel := cleanup(w.ctx)
			_ = a.undo(ctx, 0)
			cancel()
		}
		return waitError(w.ctx, w.name)
	}
	waits := cfg.mayRetry(n)
	switch {
	case waits && notRun(err):
		return w.backOff(err)
	case !w.lost(err): // a change sent once ends here too
	case (policy == readOnly || policy == claims) && waits:
		return w.backOff(err)
	case policy == undoable && waits:
		return w.undoLost(a, true)
	case policy >= undoable:
		_ = w.undoLost(a, false) // the call ends with err all the same
	}
	return redisError(w.kind.noun(), w.name, err)
}

// lost reports whether an attempt that failed with err may have run with
// its reply lost: no reply came, it was sent, and the client is open.
func (w *waiting) lost(err error) bool {
	return !scripts.IsReply(err) && !scripts.NotSent(err) && !errors.Is(err, ErrNotSynced) &&
		!errors.Is(err, ErrSyncUnavailable) && !errors.Is(err, rueidis.ErrClosing) && w.c.checkOpen() == nil
}

// undoLost gives back what an attempt whose reply was lost may have
// taken, so that it does not block everyone until its TTL ends. It backs
// off first (the server may be restarting), then undoes, again until Redis
// answers: while the call waits, until its ctx, wait limit or Close ends
// the wait, whose error it returns; else once, within the release window.
func (w *waiting) undoLost(a attempter, waits bool) error {
	ctx, pause := w.ctx, w.sleepOut
	if !waits {
		// A bounded clean-up follows a call that is already ending: its
		// wait limit, which may have run out, does not cut it short.
		var cancel context.CancelFunc
		ctx, cancel = cleanup(w.ctx)
		defer cancel()
		pause = retry.Sleep(ctx, w.c.done)
	}
	return retry.Until(undoBackoff, pause, func(n int) retry.Outcome {
		err := a.undo(ctx, n)
		if scripts.Answered(err) || !waits {
			return retry.Done
		}
		w.c.outages.Failing(&w.outage, err)
		return pacing(err)
	})
}

// undoBackoff paces undoLost: it pauses first, as the server may be
// restarting.
var undoBackoff = retry.Backoff{First: 20 * time.Millisecond, Max: time.Second, PauseFirst: true}
