package reentrant

import (
	"context"
	"errors"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/attempt"
	"github.com/relock-go/relock/reentrant/internal/directed"
	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// cycle is one Lock call's side of the acquire loop (see waiting.run),
// whatever the lock's kind: its attempts run the kind's acquire script,
// which returns the holder's PTTL when the lock is taken; a win is recorded
// as a hold, which the watchdog keeps unless the call set a lease. An
// attempt whose reply was lost is undone by a release when the owner was
// made for this call (undoable); with an owner the caller gave, which may
// hold the lock elsewhere too, it is sent once.
//
// How the wait is woken is the call's waker (see waker), which the cycle
// calls at fixed points and never asks about: what differs between the
// kinds' waits is there, each in the file of its protocol.
type cycle struct {
	waiting
	l       *lockRef
	wake    waker
	policy  retryPolicy
	given   context.Context // as Lock was given it
	cfg     acquireConfig
	owner   Owner
	private bool // owner was made for this call: a hold of it can only be this call's
	key     holdKey
	backoff time.Duration // the last spin or queued-idle sleep
	// The wakers' own state for the call, each touched only by its waker:
	// directed wakes and handoffs (directed.go), a queued lock's grants
	// (fair.go).
	directed directed.Wait
	grants   waitstate.Grants
	last     sentTry
	held     context.Context // of the hold the cycle took
}

// A waker is how a lock's waits are woken: one per protocol (directed
// wakes and handoffs, queued grants, a group's value channels, a kind's
// channel, polling), chosen once per handle by its kind (Client.newLock),
// and per call only where the call's options ask for polling or its owner
// may close a deadlock (Lock.wakerFor). A waker holds no state of a call:
// what it keeps is in the cycle's field of its own.
type waker interface {
	// begin readies the wait before its first attempt.
	begin(c *cycle)
	// given takes the lock when a release gave it to the wait since its
	// last attempt.
	given(c *cycle) (outcome, bool)
	// args returns a, the arguments of the attempt about to be sent,
	// with the waker's part set.
	args(c *cycle, a scripts.Acquire) scripts.Acquire
	// answered follows the reply r to an attempt, and returns it as the
	// cycle is to read it; taken, when the reply handed the wait a hold,
	// which the waker took.
	answered(c *cycle, r lockAttempt) (_ lockAttempt, taken bool)
	// blocked follows an attempt that did not take the lock; its error,
	// if any, ends the call.
	blocked(c *cycle, r lockAttempt) error
	// won follows a hold kept.
	won(c *cycle)
	// sleep bounds the pause after an attempt that found the lock held
	// with pttl left (0: free, but not the wait's; -1: unknown).
	sleep(c *cycle, pttl time.Duration) time.Duration
	// end follows the call's end with err; sub was its subscription.
	end(c *cycle, sub *pubsub.Waiter, err error)
	// sending is called as t is sent, wherever it runs (an attempt cut
	// short is answered on a worker); what it returns, with the reply.
	sending(t lockTry) func(r lockAttempt)
	// undo gives back what attempt t took or joined, once its reply r
	// came, for a caller that gave up on it.
	undo(ctx context.Context, t lockTry, r lockAttempt)
	// polling is the waker of a call with a retry delay: it polls at that
	// pace.
	polling() waker
}

// sent is what sending returns when there is nothing to record, and
// nothing what stands for a step that does nothing. They live beside the
// waker, not in wakers.go: a plain lock's attempt runs them, and its walk
// need not enter the other wakers' file for two empty functions.
func sent(lockAttempt) {}
func nothing()         {}

// takesWhatIsGiven reports whether the call takes the lock straight from a
// release that gives it (a plain lock's handoff, a queued lock's grant): it
// waits, for an owner made for it; the watchdog keeps what it takes (a
// given hold's TTL is what is left of the lease its offer or last attempt
// asked for, not what a fixed lease promises); it polls at no fixed pace;
// and no replica must confirm its acquire (a given hold is confirmed by
// nobody's WAIT but the releaser's).
func (c *cycle) takesWhatIsGiven() bool {
	return c.private && c.cfg.wait != 0 && c.cfg.lease == 0 && c.cfg.retryDelay == 0 && c.l.c.runner.Conn().Replicas == 0
}

// sentTry is what a cycle knows of its last attempt.
type sentTry struct {
	n     int           // its number, from 1: a grant names the attempt it answers
	ttl   time.Duration // the TTL it asked for
	at    time.Time     // when it was sent: the hold's TTL runs from then at the latest
	token int64         // the fenced token it drew
	// abandoned: ctx ended while it was in flight; its reply is awaited,
	// and what it did undone, in the background (see attempt.Once).
	abandoned bool
	// requestID names the release that undoes it if its reply was lost,
	// the same across that release's tries.
	requestID string
}

// acquire takes the lock for owner, ctx's (zero: ctx carries none), its
// waits woken by w, and returns the held context. The caller checked the
// handle and ctx (lockRef.check).
func (l *lockRef) acquire(ctx context.Context, cfg acquireConfig, owner Owner, w waker) (context.Context, error) {
	var c cycle
	l.startCycle(&c, ctx, cfg, owner, w)
	err := c.end(c.run(&c, c.policy, cfg))
	if err != nil {
		return nil, err
	}
	return c.held, nil
}

// startCycle readies c for a call with ctx and cfg, for owner (zero: one
// made for the call), woken by w.
func (l *lockRef) startCycle(c *cycle, ctx context.Context, cfg acquireConfig, owner Owner, w waker) {
	given := ctx
	private := owner.IsZero()
	if private {
		owner = l.c.NewOwner()
		ctx = WithOwner(ctx, owner)
	}
	c.waiting.begin(l.c, ctx, l.row.kind, l.name, cfg)
	c.l, c.given, c.cfg = l, given, cfg
	c.owner, c.private, c.key = owner, private, l.key(owner)
	c.policy = sendOnce
	if private {
		c.policy = undoable
	}
	c.wake = w
	w.begin(c)
}

// try runs attempt n, with the TTL the hold would have; or, when a release
// gave the lock to this wait since its last attempt, takes it with none.
func (c *cycle) try(int) outcome {
	if o, ok := c.wake.given(c); ok {
		return o
	}
	c.last = sentTry{n: c.last.n + 1, ttl: c.l.c.holds.acquireTTL(c.key, c.cfg.lease), at: time.Now()}
	r, taken := c.wake.answered(c, c.attempt(c.last.ttl))
	if taken {
		return outcome{taken: true}
	}
	if !r.OK {
		if err := c.wake.blocked(c, r); err != nil {
			return outcome{final: err}
		}
	}
	c.last.token = r.Token
	// An acquire rolled back for want of replica sync (r.err set) took
	// nothing.
	return outcome{err: r.err, taken: r.OK && r.err == nil, bound: r.PTTL, abandoned: c.last.abandoned}
}

// keep records the hold the last attempt took (see holdTable.keep).
func (c *cycle) keep(outcome) (err error) {
	c.held, err = c.record(c.last.ttl, c.last.at, c.last.token)
	switch {
	case errors.Is(err, errHoldExpired):
		// The hold ended with no release to wake anyone: the next attempt
		// comes at once, whatever backoff came before (a fair waiter's
		// attempt then tells the queue's new head its turn has come).
		c.backoff = 0
	case !errors.Is(err, errLateReply):
		c.wake.won(c)
	}
	return err
}

// sleepAfter bounds the pause after an attempt that found the lock held,
// with o.bound left on it, or free after a late reply (o.taken).
func (c *cycle) sleepAfter(o outcome) time.Duration {
	if o.taken {
		return c.wake.sleep(c, 0)
	}
	return c.wake.sleep(c, o.bound)
}

// undo releases the hold a lost attempt of a private owner may have taken:
// one hold, so that it does not block everyone until its TTL ends.
func (c *cycle) undo(ctx context.Context, try int) error {
	if try == 0 {
		c.last.requestID = c.l.c.newRequestID()
	}
	_, err := c.l.release(ctx, c.owner, c.last.ttl, c.last.requestID, try > 0, false)
	return err
}

// record records the lock just taken and returns its held context, which
// carries the token a fenced lock drew (tokens start at 1).
func (c *cycle) record(ttl time.Duration, sent time.Time, token int64) (context.Context, error) {
	ctx := c.ctx
	if token > 0 {
		ctx = context.WithValue(ctx, tokenKey{}, token)
	}
	n := taken{parent: ctx, given: c.given, kind: c.kind, key: c.key,
		group: renewGroupOf(c.l.name, c.l.row.renewer), lease: c.cfg.lease, ttl: ttl, sent: sent}
	if c.cfg.progress > 0 {
		n.progress, n.giveBack = c.cfg.progress, c.l.giveBack(c.owner, ttl)
	}
	return c.l.c.holds.keep(n)
}

// end finishes the cycle with err, its result: it ends the wait, and its
// waker what it began.
func (c *cycle) end(err error) error {
	sub := c.sub
	err = c.waiting.end(err)
	c.wake.end(c, sub, err)
	return err
}

// attempt runs the lock's acquire script once (see attempt.Once).
func (c *cycle) attempt(ttl time.Duration) lockAttempt {
	ctx := c.ctx
	if c.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.timeout)
		defer cancel()
	}
	l := c.l
	t := lockTry{l: l, w: c.wake, owner: c.owner, private: c.private, cfg: c.cfg, acq: scripts.Acquire{
		Key: l.name, Owner: c.owner.id, Lease: ttl, Join: c.cfg.wait != 0, Publish: l.c.publish,
		Fields: l.fields, CounterTTL: l.c.opts.FencingCounterTTL}}
	t.acq = c.wake.args(c, t.acq)
	if ctx.Done() == nil { // nothing can cut it short
		return t.Run(ctx)
	}
	var r lockAttempt
	var abandoned bool
	if c.private && l.row.guarded {
		r, abandoned = t.runGuarded(ctx)
	} else {
		r, abandoned = attempt.Once[lockAttempt](l.c.attempts, ctx, t)
	}
	if abandoned {
		c.last.abandoned = true
		r.err = attempt.Abandoned(ctx)
	}
	return r
}

// lockTry is one attempt of a cycle: what running it and undoing it need, by
// value, so that an undo in the background holds nothing of the cycle.
type lockTry struct {
	l       *lockRef
	w       waker
	owner   Owner
	private bool // see cycle
	cfg     acquireConfig
	acq     scripts.Acquire // the script's arguments, the waker's part set
}

// Run runs the acquire script; an acquire that replicas did not confirm is
// rolled back (see unsynced).
func (t lockTry) Run(ctx context.Context) (r lockAttempt) {
	l := t.l
	after := t.w.sending(t)
	r.Acquired, r.err = l.row.acquire(ctx, l.c.runner.Conn(), t.acq)
	after(r)
	if r.OK && r.err != nil {
		r.err = l.unsynced(ctx, t.owner, t.acq.Lease, r.err)
	}
	return r
}

// Undo undoes what an attempt the caller gave up on did, once its reply
// came (see waker.undo).
func (t lockTry) Undo(ctx context.Context, r lockAttempt) { t.w.undo(ctx, t, r) }

// undoHold releases the hold attempt r took: one hold, so a re-entry keeps
// the others. An attempt that got no answer may have taken one; it is
// released for a private owner only, whose hold can only be the attempt's.
// One try, detached from ctx; if it fails, the hold expires with its TTL.
func (t lockTry) undoHold(ctx context.Context, r lockAttempt) {
	l := t.l
	lost := r.err != nil && !r.OK && !scripts.IsReply(r.err) && !scripts.NotSent(r.err)
	if !(r.OK && r.err == nil) && !(lost && t.private) {
		return
	}
	ctx, cancel := cleanup(ctx)
	defer cancel()
	if _, err := l.release(ctx, t.owner, t.acq.Lease, l.c.newRequestID(), false, false); err != nil {
		l.c.opts.Logger.Debug("relock: undoing an attempt cut short", "lock", l.name, "error", err)
	}
}

// runGuarded runs t on the caller's goroutine, with the caller's ctx, for
// a kind whose acquire script takes a guard (kind.guarded) and an owner
// made for the call. An attempt that ctx cuts short in flight may still
// run, on a connection an undo does not share; so, instead of waiting for
// its reply on a worker (attempt.Once), its guard is set, which makes the
// attempt do nothing if it runs after, and then what it may have taken is
// given back: in that order, whichever the attempt met, nothing is left.
// It reports whether the attempt was given up on (its error is then
// attempt.Abandoned's).
func (t lockTry) runGuarded(ctx context.Context) (lockAttempt, bool) {
	t.acq.Guard = true
	r := t.Run(ctx)
	switch {
	case ctx.Err() == nil, scripts.NotSent(r.err):
		return r, false // ctx lives on, or the attempt surely did not run: the cycle goes on
	case r.err == nil || scripts.IsReply(r.err):
		// Answered, but ctx ended meanwhile (rueidis's synchronous path
		// heeds only ctx's deadline): what it took is given back, as
		// attempt.Once's worker does with a reply that comes too late.
		answered := r
		t.l.c.background(func() { t.Undo(ctx, answered) })
	default:
		lost := r // the background's own copy: r's error is replaced below
		t.l.c.background(func() { t.abandon(ctx, lost) })
	}
	r.err = attempt.Abandoned(ctx)
	return r, true
}

// abandon sets t's guard and then gives back what t may have taken (see
// runGuarded), one try each, detached from ctx but for its values. If the
// guard cannot be set, an attempt that runs after the release holds until
// its TTL ends, as when an undo fails.
func (t lockTry) abandon(ctx context.Context, r lockAttempt) {
	gctx, cancel := cleanup(ctx)
	defer cancel()
	if err := scripts.Abandon(gctx, t.l.c.runner.Conn(), t.l.name, t.owner.id, t.acq.Lease); err != nil {
		t.l.c.opts.Logger.Debug("relock: guarding an attempt cut short", "lock", t.l.name, "error", err)
	}
	t.Undo(ctx, r)
}
