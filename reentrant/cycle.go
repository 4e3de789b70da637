package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/attempt"
	"github.com/relock-go/relock/reentrant/internal/retry"
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
type cycle struct {
	waiting
	l       *lockRef
	given   context.Context // as Lock was given it
	cfg     acquireConfig
	owner   Owner
	private bool // owner was made for this call: a hold of it can only be this call's
	key     holdKey
	backoff time.Duration // the last spin or fair-idle sleep
	// directed: the wait's directed wakes and handoffs (directed.go).
	directed directedWait
	// grants: the fair or priority lock's grant protocol (fair.go).
	grants grantWait
	// deadlock: the wait's deadlock detection (deadlock.go).
	deadlock deadlockCheck
	last     sentTry
	held     context.Context // of the hold the cycle took
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

// acquire takes the lock and returns the held context.
func (l *lockRef) acquire(ctx context.Context, cfg acquireConfig) (context.Context, error) {
	if err := l.check(ctx, cfg.err); err != nil {
		return nil, err
	}
	var c cycle
	l.startCycle(&c, ctx, cfg)
	policy := sendOnce
	switch {
	case c.grants.on:
		policy = claims
	case c.private:
		policy = undoable
	}
	if c.grants.subscribeFirst(&l.c.names, l.name) {
		c.subscribeFirst()
	}
	err := c.end(c.run(&c, policy, cfg))
	c.grants.end(&l.c.names, l.name)
	if err != nil {
		return nil, err
	}
	return c.held, nil
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

// try runs attempt n, with the TTL the hold would have; or, when a release
// gave a fair lock to this waiter since the last attempt, takes it with
// none.
func (c *cycle) try(int) outcome {
	if o, ok := c.takeGiven(); ok {
		return o
	}
	c.last = sentTry{n: c.last.n + 1, ttl: c.l.c.holds.acquireTTL(c.key, c.cfg.lease), at: time.Now()}
	r := c.attempt(c.last.ttl)
	if r.Handed {
		if o, ok := c.takeHandoff(c.directed.handed); ok {
			return o
		}
		// Another waiter of this client took it: the lock is held.
		r.OK, r.Handed, r.PTTL = false, false, -1
	}
	c.grants.answered(r.err == nil && !r.OK)
	if !r.OK {
		if err := c.notTaken(r); err != nil {
			return outcome{final: err}
		}
	}
	c.last.token = r.Token
	// An acquire rolled back for want of replica sync (r.err set) took
	// nothing.
	return outcome{err: r.err, taken: r.OK && r.err == nil, bound: r.PTTL, abandoned: c.last.abandoned}
}

// takeGiven takes the lock when a release gave it to this wait since its last
// attempt: a plain lock handed to its client's offer (directed wakes), or
// a fair lock granted to its last attempt.
func (c *cycle) takeGiven() (outcome, bool) {
	if c.sub == nil {
		return outcome{}, false
	}
	if n := c.directed.handedOver(c.sub); n != 0 {
		if o, ok := c.takeHandoff(n); ok {
			return o, true
		}
	}
	if c.grants.granted(c.sub, c.last.n) {
		// The grant answers the last attempt, and ran after it did,
		// which was sent at c.last.at: its TTL, at least that attempt's
		// lease counted from the grant, ends after c.last.at + c.last.ttl. A
		// grant that names an earlier attempt is stale.
		return outcome{taken: true}, true
	}
	return outcome{}, false
}

// notTaken follows an attempt that did not take the lock. With directed
// wakes, the wait's channel is named and the wait counted among its
// client's offer's; an attempt that was answered notes what blocks it and
// looks for a deadlock, whose error, if this wait is the victim, ends it.
func (c *cycle) notTaken(r lockAttempt) error {
	if c.directed.on {
		c.wakeChannel() // a pause after it may subscribe
		c.directed.failed()
	}
	if r.err != nil {
		return nil
	}
	if r.Blocker != "" {
		c.blockedBy(r.Blocker)
	}
	c.foundHolder()
	return c.deadlock.check(c.ctx, c.l.c, c.owner.id, c.l.name, c.l.kind == writeLock)
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
		c.directed.nudge(c.sub)
	}
	return err
}

// sleepAfter bounds the pause after an attempt that found the lock held,
// with o.bound left on it, or free after a late reply (o.taken).
func (c *cycle) sleepAfter(o outcome) time.Duration {
	bound := o.bound
	if o.taken {
		bound = 0
	}
	d := c.nextSleep(bound)
	if c.deadlock.on {
		// The first check for a deadlock comes when the wait has lasted
		// DeadlockTimeout, not at the re-poll after.
		if until := time.Until(c.deadlock.since.Add(c.l.c.opts.DeadlockTimeout)); until > 0 && until < d {
			d = until
		}
	}
	return d
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

// startCycle readies c for a call with ctx and cfg.
func (l *lockRef) startCycle(c *cycle, ctx context.Context, cfg acquireConfig) {
	given := ctx
	owner, ok := OwnerFrom(ctx)
	private := !ok
	if private {
		owner = l.c.NewOwner()
		ctx = WithOwner(ctx, owner)
	}
	c.waiting.begin(l.c, ctx, l.kind.spec().kind, l.name, cfg)
	c.l, c.given, c.cfg = l, given, cfg
	c.listenAs(owner)
	c.owner, c.private, c.key = owner, private, holdKey{l.name, l.field(owner)}
	c.grants.on = private && l.takesGrants(cfg)
	c.directed.handoff = c.directed.on && private && l.takesHandoffs(cfg)
	// An owner made for the call holds nothing, so it cannot close a
	// cycle of waits.
	if !private && cfg.wait != 0 && l.c.opts.DeadlockTimeout > 0 && !l.kind.spec().noDeadlocks {
		// In whole milliseconds, as the edge stores it: every member of a
		// cycle compares the same times when it picks the victim.
		c.deadlock = deadlockCheck{on: true, since: time.UnixMilli(time.Now().UnixMilli())}
	}
}

// listenAs picks how the cycle's waits are woken, by the lock's kind: a
// spin lock or a call with a retry delay polls; a plain or fenced lock
// takes directed wakes; a group lock listens on its values' channels; any
// other on its kind's channel for owner.
func (c *cycle) listenAs(owner Owner) {
	switch {
	case c.cfg.retryDelay != 0 || c.l.kind.spec().spins: // polls
	case c.l.directed():
		c.listenDirected()
	case c.l.kind == groupLock:
		c.listenGroup()
	default:
		c.announcedOn(c.l.channel(owner), pubsub.LockWakes, "")
	}
}

// listenDirected sets up a plain or fenced lock's directed wakes. A
// channel still live (another waiter's, or lingering after one) is joined
// before the first attempt: a release after that attempt registered the
// client is heard, so a failed attempt needs no second one after
// subscribing.
func (c *cycle) listenDirected() {
	c.directed = directedWait{on: true, h: &c.l.c.handoffs, name: c.l.name, waits: c.cfg.wait != 0, offers: c.l.kind.spec().handsOn}
	c.announcedOn("", pubsub.LockWakes, c.l.name) // named when needed: wakeChannel
	if c.cfg.wait == 0 || c.l.c.sub.Idle() {
		return
	}
	if w := c.l.c.sub.Join(c.wakeChannel()); w != nil {
		c.sub, c.subscribe = w, false
	}
	if w := c.l.c.sub.Join(scripts.LockChannel(c.l.name)); w != nil {
		c.also = w
	}
}

// listenGroup sets up a group lock's wait: its channel is named when an
// attempt finds the values held (see blockedBy), unless the first value's
// channel is live: joined before the first attempt, it hears a release
// after that attempt, so a failed attempt blocked by that value needs no
// second one.
func (c *cycle) listenGroup() {
	c.announcedOn("", pubsub.LockWakes, "")
	c.subscribe, c.alsoWakes, c.lingers = false, groupWakes, true
	if c.cfg.wait == 0 || c.l.c.sub.Idle() {
		return
	}
	ch := scripts.GroupValueChannel(c.l.name, c.l.fields[0])
	if w := c.l.c.sub.Join(ch); w != nil {
		c.channel, c.sub = ch, w
	}
}

// blockedBy makes a group lock's wait listen on the channel of value field
// f, the one whose hold ends last among those that kept the last attempt
// out: relock's releases announce there that f became free, to one waiter
// of each client (grouprelease.lua). A wait that listened for another
// value leaves that channel (any wake it had not acted on passes to the
// next local waiter there) and subscribes anew, with a look after, as
// after its first attempt. It listens on Redisson's channel too, for Java
// releases, which announce nothing else.
func (c *cycle) blockedBy(f string) {
	if ch := scripts.GroupValueChannel(c.l.name, f); ch != c.channel {
		if c.sub != nil {
			c.sub.Leave()
			c.sub = nil
		}
		c.channel, c.subscribe = ch, true
	}
	c.listenAlso(scripts.LockChannel(c.l.name))
}

// takesGrants reports whether a call with cfg, for an owner made for it,
// takes a fair or priority lock straight from a release (see handOff in
// scripts/fairlib.lua and scripts/prioritylib.lua): it waits; the
// watchdog keeps what it takes (a grant's TTL is what is left of the lease
// the waiter's last attempt asked for, not what a fixed lease promises);
// and no replica must confirm its acquire (a grant is confirmed
// by nobody's WAIT but the releaser's).
func (l *lockRef) takesGrants(cfg acquireConfig) bool {
	return l.kind.spec().queued && cfg.wait != 0 && cfg.lease == 0 && cfg.retryDelay == 0 && l.c.runner.conn().Replicas == 0
}

// takesHandoffs reports whether a call with cfg, for an owner made for
// it, takes a plain lock straight from a release (directed.go), on the terms
// of takesGrants.
func (l *lockRef) takesHandoffs(cfg acquireConfig) bool {
	return l.kind.spec().handsOn && cfg.wait != 0 && cfg.lease == 0 && cfg.retryDelay == 0 && l.c.runner.conn().Replicas == 0
}

// takeHandoff takes the hold a release gave this client's offer n, if it
// is the offer's and the cycle takes handoffs: the cycle's owner becomes
// the offer's (its own was made for the call, so nothing else knows it).
// A wait that does not take handoffs gives the hold back (see
// handoffs.takeBack). It reports false when the cycle goes on.
func (c *cycle) takeHandoff(n int64) (outcome, bool) {
	sent, lease, ok := c.directed.take(n)
	if !ok {
		// Taken by another wait here (a message and an attempt may both
		// name it), or withdrawn, whose give-back releases it.
		return outcome{}, false
	}
	var buf [20]byte
	c.owner = Owner{id: c.l.c.id + ":" + string(strconv.AppendInt(buf[:0], n, 10))}
	c.key = holdKey{c.l.name, c.l.field(c.owner)}
	c.ctx = WithOwner(c.ctx, c.owner)
	c.last.at, c.last.ttl, c.last.token = sent, lease, 0
	// The release moved the client to the end of the waiters' set. If it
	// has no waiter left, its release of this hold drops it while it still
	// listens on Redisson's channel (see handoffs.ownOffer): no release but
	// that one can come first. After a longer hold, a later release finds
	// nobody listening on its wake channel, and drops it then.
	return outcome{taken: true}, true
}

// wakeChannel names the channel of the cycle's directed wakes, once: only
// a cycle that may wait on it pays for the name (see try).
func (c *cycle) wakeChannel() string {
	if c.channel == "" {
		c.channel = scripts.WakeChannel(c.l.name, c.l.c.id)
	}
	return c.channel
}

// record records the lock just taken and returns its held context, which
// carries the token a fenced lock drew (tokens start at 1).
func (c *cycle) record(ttl time.Duration, sent time.Time, token int64) (context.Context, error) {
	ctx := c.ctx
	if token > 0 {
		ctx = context.WithValue(ctx, tokenKey{}, token)
	}
	return c.l.c.holds.keep(taken{parent: ctx, given: c.given, kind: c.kind, key: c.key,
		group: renewGroupOf(c.l.name, c.l.kind.spec().renewer), lease: c.cfg.lease, ttl: ttl, sent: sent})
}

// foundHolder notes, for directed wakes, that an attempt found the lock
// held: the client is registered if the call waits, and the wait listens
// on Redisson's channel too, for releases that tell no relock client
// directly (a Java holder's, an operator's forceUnlock from Java, a key
// deleted).
func (c *cycle) foundHolder() {
	if !c.directed.on {
		return
	}
	c.directed.foundHolder()
	c.listenAlso(scripts.LockChannel(c.l.name))
}

// nextSleep is how long to sleep, at most, before the next attempt.
func (c *cycle) nextSleep(pttl time.Duration) time.Duration {
	l := c.l
	d := l.c.opts.RepollInterval
	switch {
	case c.cfg.retryDelay > 0:
		return c.cfg.retryDelay
	case l.kind.spec().spins:
		c.backoff = l.spin.next(c.backoff)
		d = c.backoff
	case l.kind.spec().queued && pttl == 0:
		// Queued, and the lock is free (or expiring now) but the turn is
		// another waiter's. Redisson's Java waiters retry at once on this
		// reply; relock backs off from 1ms up to the re-poll interval
		// instead: its own turn comes with a message.
		c.backoff = retry.Doubled(c.backoff, time.Millisecond, d)
		return c.backoff
	}
	if pttl >= 0 && pttl < d {
		return pttl
	}
	return d
}

// end finishes the cycle with err, its result: it ends the wait and, if
// the lock was not taken, leaves a fair lock's queue (after the reply of an
// abandoned attempt: see undo).
func (c *cycle) end(err error) error {
	c.deadlock.end(c.ctx, c.l.c, c.owner.id)
	sub := c.sub
	err = c.waiting.end(err)
	c.directed.end(sub) // left, so no handoff comes to it now
	if err != nil && c.l.kind.spec().queued && c.cfg.wait != 0 && !c.last.abandoned {
		c.l.leaveQueue(c.ctx, c.owner, c.l.queueTurn(c.cfg))
	}
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
	t := lockTry{l: c.l, owner: c.owner, private: c.private, ttl: ttl, cfg: c.cfg}
	t.grantTry = c.grants.grantTry(c.last.n)
	if c.directed.on {
		c.dropped = c.l.c.handoffs.drops.Mark()
		t.wake = c.directed.args(c.sub, c.last.n, ttl)
		if hook := c.l.c.hookBeforeSend; hook != nil {
			hook()
		}
	}
	if ctx.Done() == nil { // nothing can cut it short
		return t.Run(ctx)
	}
	var r lockAttempt
	var abandoned bool
	if c.private && c.l.kind.spec().guarded {
		r, abandoned = t.runGuarded(ctx)
	} else {
		r, abandoned = attempt.Once[lockAttempt](c.l.c.attempts, ctx, t)
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
	l        *lockRef
	owner    Owner
	private  bool // see cycle
	ttl      time.Duration
	cfg      acquireConfig
	wake     scripts.Wake // with directed wakes (Client set)
	grantTry int          // see sentTry.n; 0 without grants
	guard    bool         // see runGuarded
}

// run runs the acquire script; an acquire that replicas did not confirm is
// rolled back (see unsynced).
func (t lockTry) Run(ctx context.Context) (r lockAttempt) {
	l := t.l
	if t.wake.Settle == scripts.SettleDrop {
		defer l.c.handoffs.drops.Sending()()
	}
	a := scripts.Acquire{Key: l.name, Owner: t.owner.id, Lease: t.ttl, Wake: t.wake,
		Turn: l.queueTurn(t.cfg), Join: t.cfg.wait != 0, Publish: l.c.publish, GrantTry: t.grantTry,
		Priority: t.cfg.priority, Aging: l.c.opts.priorityAging(), Fields: l.fields, CounterTTL: l.c.opts.FencingCounterTTL, Guard: t.guard}
	r.Acquired, r.err = l.kind.spec().acquire(ctx, l.c.runner.conn(), a)
	if o := (waitstate.Offer{N: t.wake.OfferFirst, Last: t.wake.OfferLast}); o.N != 0 {
		switch {
		case r.Handed: // taken by the cycle, or given back by undo
		case r.OK && t.wake.Settle == scripts.SettleDrop:
			l.c.names.Withdrawn(l.name, o) // with the client, by the win
		default:
			// A failure offered o; a lost reply may have.
			l.c.names.Done(l.name, o, !r.OK)
		}
	}
	if r.OK && r.err != nil {
		r.err = l.unsynced(ctx, t.owner, t.ttl, r.err)
	}
	return r
}

// undo undoes what an attempt the caller gave up on did, once its reply
// came: a hold it took is released (see undoHold), and a fair lock's
// waiter leaves the queue it may have joined.
func (t lockTry) Undo(ctx context.Context, r lockAttempt) {
	if r.Handed {
		t.l.c.handoffs.takeBack(t.l.name, t.wake.OfferFirst)
		return
	}
	t.undoHold(ctx, r)
	if t.l.kind.spec().queued && t.cfg.wait != 0 {
		t.l.leaveQueue(ctx, t.owner, t.l.queueTurn(t.cfg))
	}
}

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
	if _, err := l.release(ctx, t.owner, t.ttl, l.c.newRequestID(), false, false); err != nil {
		l.c.opts.Logger.Debug("relock: undoing an attempt cut short", "lock", l.name, "error", err)
	}
}

// unsynced handles an acquire that replicas did not confirm: kept when the
// server refuses WAIT and sync is not required (sync turns off), else rolled
// back with one release of the new hold, the acquire's TTL left to any
// outer hold. The error it returns means the lock is not held.
func (l *lockRef) unsynced(ctx context.Context, owner Owner, ttl time.Duration, syncErr error) error {
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		if err := l.c.runner.refused(syncErr); err == nil {
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
	t.guard = true
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
	if err := scripts.Abandon(gctx, t.l.c.runner.conn(), t.l.name, t.owner.id, t.ttl); err != nil {
		t.l.c.opts.Logger.Debug("relock: guarding an attempt cut short", "lock", t.l.name, "error", err)
	}
	t.Undo(ctx, r)
}
