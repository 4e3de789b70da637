package reentrant

import (
	"context"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/scripts"
)

// queueTurn is the turn a queued lock's waiter is given (see kind.turn).
func (l *lockRef) queueTurn(cfg acquireConfig) time.Duration {
	if turn := l.row.turn; turn != nil {
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
	err := l.row.leave(ctx, l.c.runner.Conn(), l.name, owner.id, turn, l.c.publish)
	return scripts.Answered(err) || l.c.checkOpen() != nil
}

// queued is the waker of a fair or priority lock, whose waiters queue in
// Redis: listens, a call that hears releases on its own channel, or, with
// a retry delay, one that polls at that pace. A release tells the head of
// the queue, or grants it the lock (grantWait); a call that gives up
// leaves the queue, so that those behind it need not wait for its turn to
// end. Its state for a call is the cycle's waitstate.Grants.
type queued struct {
	announced
	listens bool
}

// begin makes the wait listen on its own channel and, for a call that
// takes grants (cycle.takesWhatIsGiven), subscribes before the first
// attempt when the last wait on the lock queued (see subscribeFirst).
func (q queued) begin(c *cycle) {
	if !q.listens {
		return
	}
	q.announced.begin(c)
	if c.grants.On = c.takesWhatIsGiven(); !c.grants.On {
		return
	}
	c.policy = claims
	if c.l.c.names.Queued(c.l.name) {
		c.subscribeFirst()
	}
}

// given takes the lock a release granted to the last attempt.
func (queued) given(c *cycle) (outcome, bool) {
	if c.sub == nil || !c.grants.Granted(c.sub.TakeGiven(), c.last.n) {
		return outcome{}, false
	}
	// The grant answers the last attempt, and ran after it did, which was
	// sent at c.last.at: its TTL, at least that attempt's lease counted
	// from the grant, ends after c.last.at + c.last.ttl. A grant that
	// names an earlier attempt is stale.
	return outcome{taken: true}, true
}

// args sets the attempt's turn in the queue, its priority, and the number
// a grant would name.
func (queued) args(c *cycle, a scripts.Acquire) scripts.Acquire {
	a.Turn = c.l.queueTurn(c.cfg)
	a.Priority, a.Aging = c.cfg.priority, c.l.c.opts.priorityAging()
	if c.grants.On {
		a.GrantTry = c.last.n
	}
	return a
}

func (queued) polling() waker { return queued{} }

func (queued) answered(c *cycle, r lockAttempt) (lockAttempt, bool) {
	c.grants.Answered(r.err == nil && !r.OK)
	return r, false
}

// sleep: a lock free (or expiring now) whose turn is another waiter's is
// tried again after a backoff from 1ms up to the re-poll interval.
// Redisson's Java waiters retry at once on this reply; a relock waiter's
// own turn comes with a message.
func (q queued) sleep(c *cycle, pttl time.Duration) time.Duration {
	switch {
	case !q.listens:
		return c.cfg.retryDelay
	case pttl == 0:
		c.backoff = retry.Doubled(c.backoff, time.Millisecond, c.l.c.opts.RepollInterval)
		return c.backoff
	}
	return c.bounded(pttl)
}

// end leaves the queue after a wait that did not take the lock (after the
// reply of an abandoned attempt: see undo), and records, for the next
// wait, whether this one queued.
func (queued) end(c *cycle, _ *pubsub.Waiter, err error) {
	if err != nil && c.cfg.wait != 0 && !c.last.abandoned {
		c.l.leaveQueue(c.ctx, c.owner, c.l.queueTurn(c.cfg))
	}
	if c.grants.On {
		c.l.c.names.Waited(c.l.name, c.grants.Waited)
	}
}

// undo gives back what an attempt the caller gave up on took, and leaves
// the queue it may have joined.
func (queued) undo(ctx context.Context, t lockTry, r lockAttempt) {
	t.undoHold(ctx, r)
	if t.cfg.wait != 0 {
		t.l.leaveQueue(ctx, t.owner, t.l.queueTurn(t.cfg))
	}
}

// subscribeFirst subscribes the channel of a wait that takes grants before
// its first attempt. A release that grants the lock after that attempt
// then finds the waiter listening, so the attempt that otherwise follows
// the subscription at once (see waiting.pause) is not needed: the wait
// takes two scripts, its attempt and the release that hands it the lock.
//
// It waits for the server's confirmation subscribeFirstWait at most: the
// lock may be free, and a subscriber reconnecting must not hold up the
// attempt that would take it. A subscription not confirmed by then is
// kept, and its confirmation wakes the wait for an attempt (a grant before
// it went unheard); one that fails is made again after the first attempt,
// as usual.
func (c *cycle) subscribeFirst() {
	ctx, cancel := context.WithTimeout(c.ctx, subscribeFirstWait)
	defer cancel()
	if w, _ := c.l.c.sub.Subscribe(ctx, c.channel, c.wakes, nil); w != nil {
		c.sub, c.subscribe = w, false // confirmed, or kept unconfirmed
	}
}

// subscribeFirstWait bounds how long subscribeFirst waits for the
// server's confirmation: many round trips of a loaded loopback, and a
// fifth of the fault suite's slack for a wait (oracle E).
const subscribeFirstWait = 50 * time.Millisecond
