package reentrant

import (
	"context"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// queueTurn is the turn a queued lock's waiter is given (see kind.turn).
func (l *lockRef) queueTurn(cfg acquireConfig) time.Duration {
	if turn := l.kind.spec().turn; turn != nil {
		return turn(&l.c.opts, cfg.wait)
	}
	return 0
}

// leaveQueue takes owner out of a fair or priority lock's queue after a wait that ended
// without the lock, as Redisson's acquireFailed does, so that those behind
// it need not wait for its deadline: a waiter left at the head of the queue
// would hold up everyone for its whole turn. It runs even when ctx is
// cancelled, and waits for replicas as a release does. When Redis gives no
// answer, it tries again in the background, for up to the release window or
// until Close, so that the wait that gave up returns at once; leaving twice
// is the same as leaving once. If every try fails, the owner's deadline
// drops it from the queue.
func (l *lockRef) leaveQueue(ctx context.Context, owner Owner, turn time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	if l.leftQueue(ctx, owner, turn) {
		cancel()
		return
	}
	l.c.background(func() {
		defer cancel()
		defer context.AfterFunc(l.c.closing, cancel)()
		err := retry.Until(leaveBackoff, retry.Sleep(ctx, l.c.done), func(int) retry.Outcome {
			if l.leftQueue(ctx, owner, turn) {
				return retry.Done
			}
			return retry.Again
		})
		if err != nil && ctx.Err() != nil && l.c.checkOpen() == nil {
			l.c.opts.Logger.Warn("relock: could not leave a fair lock's queue; the entry is dropped when its turn ends", "lock", l.name)
		}
	})
}

// leaveBackoff paces leaveQueue's tries after the first, which failed.
var leaveBackoff = retry.Backoff{First: 10 * time.Millisecond, Max: time.Second, PauseFirst: true}

// leftQueue runs the leave script once and reports whether it is done:
// Redis answered, or no later try could help.
func (l *lockRef) leftQueue(ctx context.Context, owner Owner, turn time.Duration) bool {
	err := l.kind.spec().leave(ctx, l.c.runner.conn(), l.name, owner.id, turn, l.c.publish)
	return scripts.Answered(err) || l.c.checkOpen() != nil
}

// grantWait is a fair or priority lock's wait that takes the lock straight
// from a release (Lock.takesGrants): an attempt that queues asks, with its
// number, to be granted the lock, and a release that frees it grants it to
// the head of the queue, naming that number on the head's channel. The
// cycle calls it at fixed points: before the wait (subscribeFirst), with
// each attempt's arguments (grantTry), after each reply (answered), before
// each attempt (granted), and at the end (end). The zero grantWait takes
// no grants.
type grantWait struct {
	on bool
	// queued: the last attempt was answered that the wait is queued, so a
	// grant that names it came after it ran; waited: an attempt was.
	queued, waited bool
}

// subscribeFirst reports whether the wait should subscribe before its
// first attempt: the last wait on the lock queued, so this one likely
// will (see waitstate.Table.Queued).
func (g *grantWait) subscribeFirst(names *waitstate.Table, name string) bool {
	return g.on && names.Queued(name)
}

// grantTry is what attempt number tries asks: to be granted the lock under
// that number; 0 asks nothing.
func (g *grantWait) grantTry(tries int) int {
	if g.on {
		return tries
	}
	return 0
}

// answered records the reply to an attempt: queued, it found the lock
// taken and the wait in the queue.
func (g *grantWait) answered(queued bool) {
	g.queued = queued
	g.waited = g.waited || queued
}

// granted reports whether a release granted the lock to attempt number
// tries, the last one, which queued: its grant, taken from sub, names it.
// A grant that names an earlier attempt is stale.
func (g *grantWait) granted(sub *pubsub.Waiter, tries int) bool {
	return sub.TakeGiven() == int64(tries) && g.queued
}

// end records, for the next wait on the lock, whether this one queued.
func (g *grantWait) end(names *waitstate.Table, name string) {
	if g.on {
		names.Waited(name, g.waited)
	}
}
