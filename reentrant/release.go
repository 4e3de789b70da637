package reentrant

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/reentrant/internal/errtext"
	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/scripts"
	"github.com/relock-go/relock/watchdog"
)

// unlock is Unlock, retrying for at most window.
func (l *lockRef) unlock(ctx context.Context, window time.Duration) (err error) {
	owner, err := l.unlockOwner(ctx)
	if err != nil {
		return err
	}
	key := l.key(owner)
	a, restore, lease, found := l.c.holds.drop(key)
	if !found {
		// This client gave the hold up already (its key vanished, no
		// renewal was confirmed in time, its lease ended, or it stalled
		// and was given back): nothing of it is left to give back, and
		// during an outage trying would only wait. The table says so as soon as the hold leaves it, before
		// its held context is cancelled.
		cause := l.c.holds.goneCause(ctx, key)
		if cause == nil && ctx.Err() != nil {
			cause = context.Cause(ctx)
		}
		switch {
		case errors.Is(cause, ErrLockLost) && strings.HasPrefix(cause.Error(), "relock: unlock "):
			return cause // the loss an earlier Unlock found, and said
		case errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrLeaseEnded) || errors.Is(cause, ErrStalled):
			return errtext.Wrap(fmt.Sprintf("relock: unlock %q", l.name), cause)
		}
	}
	if found {
		start := time.Now()
		defer func() {
			var cause error
			if errors.Is(err, ErrLockLost) {
				cause = err
			}
			l.c.holds.ended(key, a, cause, err, time.Since(start))
			// An Unlock that finds the lock lost ends the held context as
			// a loss, as the watchdog would have a moment later.
			a.cancel(cmp.Or(cause, context.Canceled))
		}()
	}
	believed := l.believed(found, lease)
	res, resent, err := l.releaseRetried(context.WithoutCancel(ctx), owner, restore, lease, window, believed)
	if err != nil {
		return err
	}
	return l.released(res, found, resent && believed, key)
}

// unlockOwner returns the owner an Unlock with ctx gives a hold back for.
func (l *lockRef) unlockOwner(ctx context.Context) (Owner, error) {
	if err := l.check(ctx, nil); err != nil {
		return Owner{}, err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok && l.c.holds.lockedWith(ctx, l.name) {
		// The commonest slip: Unlock(ctx) where Unlock(held) was meant. It
		// is logged, since a deferred Unlock's error is often dropped, and
		// the lock would stay held and renewed until Close.
		l.c.opts.Logger.Error("relock: Unlock was given the context passed to Lock, not the one Lock returned; the lock stays held", "lock", l.name)
		return Owner{}, fmt.Errorf("relock: unlock %q: %w (this is the context given to Lock; pass the one Lock returned)", l.name, ErrNotHeld)
	}
	if !ok {
		return Owner{}, fmt.Errorf("relock: unlock %q: %w (the context carries no owner)", l.name, ErrNotHeld)
	}
	return owner, nil
}

// releaseRetried sends owner's release, and again, with the same request
// id, while its reply is lost or the server cannot run scripts: for at
// most window, and, for a hold this client has (lease not nil), not past
// its local deadline: after it the key may have expired and another may
// hold the lock, so there is nothing left to give back. The first attempt
// needs no timer of its own: rueidis fails it when the connection stalls
// (ConnWriteTimeout, 10s by default). resent says whether the answer is a
// retry's, after a send whose reply was lost.
func (l *lockRef) releaseRetried(ctx context.Context, owner Owner, restore time.Duration, lease *watchdog.Lease, window time.Duration, believed bool) (res scripts.Released, resent bool, err error) {
	requestID := l.c.newRequestID()
	var deadline time.Time // the hold's, read once a retry needs it
	ran := false           // a send so far may have run (its reply lost)
	cancel := context.CancelFunc(func() {})
	defer func() { cancel() }()
	// The pause reads ctx when it runs: after the first try, ctx carries
	// the bound of every retry and pause.
	pause := func(d time.Duration) error { return retry.Sleep(ctx, l.c.done)(d) }
	stopped := retry.Until(releaseBackoff, pause, func(n int) retry.Outcome {
		res, err = l.release(ctx, owner, restore, requestID, ran, believed)
		if err == nil || !l.retryRelease(err) {
			return retry.Done
		}
		ran = ran || !notRun(err)
		if n == 0 {
			end := time.Now().Add(window)
			if lease != nil {
				deadline = l.c.holds.watchdog.Deadline(lease)
				end = minTime(end, deadline)
			}
			ctx, cancel = context.WithDeadline(ctx, end)
		}
		return pacing(err)
	})
	switch {
	case err == nil:
		return res, ran, nil
	case stopped != nil && lease != nil && !time.Now().Before(deadline):
		return res, ran, fmt.Errorf("relock: unlock %q: %w: the hold's lease ran out before its release could be confirmed: %w", l.name, ErrLockLost, err)
	}
	return res, ran, redisError("unlock", l.name, err)
}

// releaseBackoff paces releaseRetried. The first try needs no timer of its
// own: rueidis fails it when the connection stalls.
var releaseBackoff = retry.Backoff{First: 10 * time.Millisecond, Max: time.Second}

// believed reports whether a release may count on having the hold it
// gives back (see scripts.Release.Believed): this client has it (found)
// and its local deadline has not passed, and the kind's release script
// reads the flag.
func (l *lockRef) believed(found bool, lease *watchdog.Lease) bool {
	return found && lease != nil && l.row.believes && time.Now().Before(l.c.holds.watchdog.Deadline(lease))
}

// minTime returns the earlier of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// released turns a release's reply into Unlock's result. found says
// whether this client had the hold; unlatched, whether the reply is a
// believed release's retry, after a send whose reply was lost.
func (l *lockRef) released(res scripts.Released, found, unlatched bool, key holdKey) error {
	switch {
	case res != scripts.NotHeld:
		return nil
	case found:
		// Redis has no hold where this client had one: every other
		// acquisition of it here is lost too.
		l.c.holds.lose(func(k holdKey) bool { return k == key }, ErrLockLost)
		if unlatched {
			// A believed release that freed the lock left no latch (see
			// scripts.Release.Believed), so the lost send may have freed
			// it; but a restart that lost the hold loses replies too, and
			// "freed" would then be a false all-clear.
			return fmt.Errorf("relock: unlock %q: %w, or freed by an earlier send whose reply was lost: the two cannot be told apart", l.name, ErrLockLost)
		}
		return fmt.Errorf("relock: unlock %q: %w", l.name, ErrLockLost)
	}
	return fmt.Errorf("relock: unlock %q: %w", l.name, ErrNotHeld)
}

// retryRelease reports whether a release that failed with err may be sent
// again: it got no reply (the unlock latch answers a retry of a release
// that ran), or the server could not run scripts for now (the release did
// not run); and the client is open.
func (l *lockRef) retryRelease(err error) bool {
	return l.c.checkOpen() == nil && (!scripts.IsReply(err) || scripts.IsUnavailable(err))
}

// release runs the lock's release script once for owner's newest hold;
// restore is the TTL left to the holds that remain. requestID names the
// release for the unlock latch: the same id across retries of one release.
// again says whether that request may have been sent before; believed,
// whether the caller counts on having the hold (see believed).
func (l *lockRef) release(ctx context.Context, owner Owner, restore time.Duration, requestID string, again, believed bool) (scripts.Released, error) {
	rdb := l.c.runner.Conn()
	rel := scripts.Release{
		Key:       l.name,
		Owner:     owner.id,
		RequestID: requestID,
		Again:     again,
		Lease:     restore,
		LatchTTL:  releaseWindow,
		Publish:   l.publish(),
		Directed:  l.directed(),
		Believed:  believed,
		Fields:    l.fields,
	}
	if rel.Directed && l.row.handsOn {
		rel.Handoff, rel.Count = true, l.c.counts
		if rel.Offer = l.c.handoffs.OwnOffer(l.name); rel.Offer.N != 0 || rel.Offer.Drop {
			defer l.c.handoffs.Released(l.name, rel.Offer)()
		}
	}
	res, err := l.row.release(ctx, rdb, rel)
	if err == nil && rel.Latched(res) {
		l.c.latches.Drop(rel.Latch()) // answered: it will not be sent again
	}
	return res, err
}

// unsynced handles an acquire that replicas did not confirm: kept when the
// server refuses WAIT and sync is not required (sync turns off), else rolled
// back with one release of the new hold, the acquire's TTL left to any
// outer hold. The error it returns means the lock is not held.
func (l *lockRef) unsynced(ctx context.Context, owner Owner, ttl time.Duration, syncErr error) error {
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		if err := l.c.runner.Refused(syncErr); err == nil {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	defer cancel()
	if _, err := l.release(ctx, owner, ttl, l.c.newRequestID(), false, false); err != nil {
		l.c.opts.Logger.Warn("relock: rolling back an acquire replicas did not confirm; the hold expires with its TTL", "lock", l.name, "error", err)
	}
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		return fmt.Errorf("relock: %w (%v)", ErrSyncUnavailable, syncErr)
	}
	return fmt.Errorf("relock: lock %q: %w; acquire rolled back", l.name, syncErr) // wraps ErrNotSynced
}

// giveBack returns what releases owner's stalled hold of the lock (see
// holdTable.stalled); a re-entry's release restores ttl. After a release
// that fails, the rest are not sent: the lock expires with its TTL. On a
// Client that is closing, nothing is sent, and each acquisition is told
// ErrClosed.
func (l *lockRef) giveBack(owner Owner, ttl time.Duration) giveBackFunc {
	return func(ctx context.Context, acquisitions int, released func(err error, took time.Duration)) {
		started := l.c.background(func() {
			ctx, cancel := cleanup(ctx)
			defer cancel()
			var err error
			for range acquisitions {
				start := time.Now()
				if err == nil {
					if _, err = l.release(ctx, owner, ttl, l.c.newRequestID(), false, false); err != nil {
						l.c.opts.Logger.Warn("relock: giving back a stalled hold; it expires with its TTL", "lock", l.name, "owner", owner.id, "error", err)
					}
				}
				released(err, time.Since(start))
			}
		})
		if !started {
			for range acquisitions {
				released(errClosed, 0)
			}
		}
	}
}
