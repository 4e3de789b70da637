package reentrant

import (
	"context"
	"time"
)

// What a held context tells: its holder, the progress reports of a hold
// taken with ProgressWithin (see progress.go) and the hold's lease; an
// Unlock, why its hold left the table, or that it was given the wrong
// context.

// Progress reports that the work under the hold behind ctx (a held context
// of a Lock taken with ProgressWithin, or one made from it) made progress,
// which moves the hold's progress deadline to d from now. It reports
// whether ctx is such a context of a hold still kept (false for a nil
// ctx). It sends nothing to Redis and is cheap enough to call on every
// step of a loop.
func Progress(ctx context.Context) bool {
	w := stallWatchOf(ctx)
	return w != nil && w.progressed()
}

// ProgressDue reports progress, as Progress does, and says when the next
// report is due: within d from now, for this report only (the reports
// after it are due within ProgressWithin again). So work about to do one
// long step (a migration, a large upload) can say so without a deadline
// that long for every step. A d of 0 or less stalls the hold at once: the
// work declares that it cannot go on, and the hold is given back as after
// a missed deadline (systemd's WATCHDOG=trigger). It reports what
// Progress reports.
func ProgressDue(ctx context.Context, d time.Duration) bool {
	w := stallWatchOf(ctx)
	return w != nil && w.reported(d)
}

// stallWatchOf returns the progress deadline of the hold behind ctx, or
// nil.
func stallWatchOf(ctx context.Context) *stallWatch {
	if ctx == nil {
		return nil
	}
	h, ok := ctx.Value(holdCtxKey{}).(*hold)
	if !ok {
		return nil
	}
	return h.stall
}

// LeaseDeadline returns the local deadline of the hold behind a held
// context: the time until which this client believes the lock is held, from
// the send time of the last confirmed acquire or renewal, plus the TTL,
// minus the safety margin (see docs/lease-model.md). Renewals move it
// forward. A holder about to do something that must finish under the lock
// can check that enough time is left. ok is false for a context that no
// Lock returned.
func LeaseDeadline(ctx context.Context) (deadline time.Time, ok bool) {
	h, ok := ctx.Value(holdCtxKey{}).(*hold)
	if !ok {
		return time.Time{}, false
	}
	return h.t.watchdog.Deadline(h.lease), true
}

// goneCause returns why the hold behind held context ctx left the table
// without a release, if ctx is a held context of key's hold and it did;
// else nil.
func (t *holdTable) goneCause(ctx context.Context, key holdKey) error {
	h, ok := ctx.Value(holdCtxKey{}).(*hold)
	if !ok || h.key != key {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return h.gone
}

// lockedWith reports whether ctx is the context some Lock of lock name on
// this client was given (before it added an owner), with that hold still
// here: an Unlock with ctx then got the wrong context.
func (t *holdTable) lockedWith(ctx context.Context, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.holds {
		for _, a := range h.acqs {
			if k.name == name && a.parent == ctx {
				return true
			}
		}
	}
	return false
}
