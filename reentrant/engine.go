package reentrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// cycle is one acquire call's attempt / wait / retry loop, the one place
// where a caller waits for a lock, whatever its kind. Each attempt is one
// script call. When the lock is held, the cycle sleeps until the first of:
// the PTTL the attempt returned (the hold cannot outlive it), the re-poll
// interval (a release that announced nothing, a message lost with a
// connection), a wake-up message on the lock's channel, the wait limit,
// ctx, or Close. When an attempt gets no answer, the cycle undoes what it may
// have taken and waits on, or gives the error back (see failed). Nothing
// depends on a message arriving: the PTTL and re-poll bounds hold without.
type cycle struct {
	l       *Lock
	given   context.Context // as Lock was given it
	ctx     context.Context // given, with the owner
	cfg     acquireConfig
	owner   Owner
	private bool // owner was made for this call: a hold of it can only be this call's
	key     holdKey
	timer   *time.Timer      // fires giveUp; nil without a wait limit
	giveUp  <-chan time.Time // the wait limit
	// The lock's channel is subscribed once, after the first failed
	// attempt, unless the call retries at fixed delays or spins.
	subscribe bool
	sub       *pubsub.Waiter
	woken     bool          // the last attempt followed a wake-up
	backoff   time.Duration // the last spin or fair-idle sleep
	// unavailable is the backoff while the server cannot run scripts.
	unavailable time.Duration
	// unreachable is the last attempt's error while no attempt since has
	// had an answer: a wait that ends then ended for want of Redis, not
	// because the lock was held, and says so.
	unreachable error
}

// acquire takes the lock and returns the held context.
func (l *Lock) acquire(ctx context.Context, cfg acquireConfig) (held context.Context, err error) {
	if err := l.check(ctx, cfg.err); err != nil {
		return nil, err
	}
	var c cycle // on the stack: one per call
	l.startCycle(&c, ctx, cfg)
	defer func() { err = c.end(err) }()
	for attempt := 0; ; attempt++ {
		ttl := l.c.acquireTTL(c.key, cfg.lease)
		sent := time.Now()
		acquired, pttl, token, err := l.attempt(c.ctx, c.owner, ttl, cfg)
		c.heard(err)
		switch {
		case err != nil:
			err = c.failed(attempt, ttl, err)
		case acquired:
			return c.hold(ttl, sent, token)
		default:
			err = c.held(attempt, pttl)
		}
		if err != nil {
			return nil, err
		}
	}
}

// startCycle readies c for a call with ctx and cfg.
func (l *Lock) startCycle(c *cycle, ctx context.Context, cfg acquireConfig) {
	*c = cycle{l: l, given: ctx, ctx: ctx, cfg: cfg, unavailable: 20 * time.Millisecond,
		subscribe: cfg.retryDelay == 0 && l.spin == nil}
	owner, ok := OwnerFrom(ctx)
	if c.private = !ok; c.private {
		owner = l.c.NewOwner()
		c.ctx = WithOwner(ctx, owner)
	}
	c.owner, c.key = owner, holdKey{l.name, l.field(owner)}
	if cfg.wait >= 0 {
		c.timer = time.NewTimer(cfg.wait)
		c.giveUp = c.timer.C
	}
}

// heard records whether an attempt got an answer from Redis: any reply,
// except one saying the server cannot run scripts for now.
func (c *cycle) heard(err error) {
	c.unreachable = nil
	if err != nil && (!scripts.IsReply(err) || scripts.IsUnavailable(err)) {
		c.unreachable = err
	}
}

// hold records the lock just taken and returns its held context, which
// carries the token a fenced lock drew (tokens start at 1).
func (c *cycle) hold(ttl time.Duration, sent time.Time, token int64) (context.Context, error) {
	ctx := c.ctx
	if token > 0 {
		ctx = context.WithValue(ctx, tokenKey{}, token)
	}
	return c.l.c.addHold(ctx, c.given, c.key, c.l.c.group(c.l), c.cfg.lease, ttl, sent)
}

// waiting reports whether a failed attempt may be followed by another.
func (c *cycle) waiting(attempt int) bool {
	return c.cfg.timeout == 0 && c.cfg.wait != 0 && (c.cfg.retries < 0 || attempt < c.cfg.retries)
}

// failed handles an attempt that ended in an error, and returns nil when
// the cycle goes on. Unless Redis replied with an error, the attempt's
// outcome is unknown: it may have taken the lock, and such a hold is not
// recorded, so nothing would renew or release it.
//   - ctx ended during the attempt: the attempt is undone (private owner).
//   - The server cannot run scripts for now (loading, demoted by a
//     failover): the script did not run; back off and go on.
//   - The connection broke, for a private owner: a hold of it can only be
//     the lost attempt's; it is released, and the wait goes on (or, when the
//     call would not wait, the error is returned).
//   - Anything else (an owner the caller gave, which may hold the lock
//     elsewhere; WRONGTYPE; a closed client) is returned.
func (c *cycle) failed(attempt int, ttl time.Duration, err error) error {
	l := c.l
	if c.ctx.Err() != nil {
		if c.private && !scripts.IsReply(err) && !scripts.NotSent(err) {
			l.undoCancelled(c.ctx, c.owner, ttl)
		}
		return waitError(c.ctx, l.name)
	}
	waiting := c.waiting(attempt)
	switch {
	case waiting && scripts.IsUnavailable(err):
		_, err := l.sleep(c.ctx, c.giveUp, nil, c.unavailable)
		c.unavailable = doubled(c.unavailable, 0, time.Second)
		return err
	case !c.private || c.cfg.timeout > 0 || !l.transient(err):
		return redisError("lock", l.name, err)
	case !waiting:
		l.clearAttempt(c.ctx, c.owner, ttl, err, nil, 1)
		return redisError("lock", l.name, err)
	}
	return l.clearAttempt(c.ctx, c.owner, ttl, err, c.giveUp, -1)
}

// held handles an attempt that found the lock held (pttl left on it) and
// returns nil when the cycle goes on: after the first such attempt it
// subscribes and tries again at once (a release between the attempt and the
// subscription would go unheard); after the others it sleeps.
func (c *cycle) held(attempt int, pttl time.Duration) error {
	l := c.l
	c.woken = false
	if c.cfg.retries >= 0 && attempt >= c.cfg.retries {
		return l.notAcquired()
	}
	select {
	case <-c.giveUp:
		return l.notAcquired()
	default:
	}
	if c.subscribe {
		c.subscribe = false
		var err error
		if c.sub, err = l.subscribe(c.ctx, c.owner); err == nil {
			return nil
		}
		if c.ctx.Err() != nil {
			return waitError(c.ctx, l.name)
		}
	}
	var wake <-chan struct{}
	if c.sub != nil {
		wake = c.sub.C
	}
	var err error
	if c.woken, err = l.sleep(c.ctx, c.giveUp, wake, c.nextSleep(pttl)); err != nil {
		return err
	}
	if hook := l.c.hookWoken; c.woken && hook != nil {
		hook(c.ctx)
	}
	return nil
}

// nextSleep is how long to sleep, at most, before the next attempt.
func (c *cycle) nextSleep(pttl time.Duration) time.Duration {
	l := c.l
	d := l.c.opts.RepollInterval
	switch {
	case c.cfg.retryDelay > 0:
		return c.cfg.retryDelay
	case l.spin != nil:
		c.backoff = l.spin.next(c.backoff)
		d = c.backoff
	case l.kind.spec().queued && pttl == 0:
		// Queued, and the lock is free (or expiring now) but the turn is
		// another waiter's. Redisson's Java waiters retry at once on this
		// reply; relock backs off from 1ms up to the re-poll interval
		// instead: its own turn comes with a message.
		c.backoff = doubled(c.backoff, time.Millisecond, d)
		return c.backoff
	}
	if pttl >= 0 && pttl < d {
		return pttl
	}
	return d
}

// end finishes the cycle with err, its result: it leaves the channel's
// queue, handing on a wake-up it did not use, and, if the lock was not
// taken, leaves a fair lock's queue too.
func (c *cycle) end(err error) error {
	if c.timer != nil {
		c.timer.Stop()
	}
	if err != nil && c.unreachable != nil && !errors.Is(err, c.unreachable) {
		err = outageError(c.l.name, err, c.unreachable)
	}
	if c.sub != nil {
		if err != nil && c.woken {
			c.sub.PassOn() // the wake-up was not used: the next waiter may
		}
		c.sub.Leave()
	}
	if err != nil && c.l.kind.spec().queued && c.cfg.wait != 0 {
		c.l.leaveQueue(c.ctx, c.owner, c.l.fairTurn(c.cfg))
	}
	return err
}

// outageError is the error of a wait that ended (err) while Redis did not
// answer (last, the last attempt's error). It wraps last, so errors.Is
// reaches the connection error, and it does not wrap ErrNotAcquired: the
// lock was not found held by someone else, Redis could not be asked.
func outageError(name string, err, last error) error {
	if errors.Is(err, ErrNotAcquired) {
		return fmt.Errorf("relock: lock %q: no answer from Redis before the wait ran out: %w", name, last)
	}
	return fmt.Errorf("%w (last attempt: %w)", err, last) // err says "relock:"
}

// transient reports whether an attempt's error is a broken or stalled
// connection on an open client, which a later attempt may not meet.
func (l *Lock) transient(err error) bool {
	return !scripts.IsReply(err) && !errors.Is(err, ErrNotSynced) && !errors.Is(err, ErrSyncUnavailable) &&
		!errors.Is(err, rueidis.ErrClosing) && l.c.checkOpen() == nil
}

// clearAttempt releases the hold a lost attempt of a private owner may have
// taken, so that it does not block everyone until its TTL ends. It backs off
// first (the server may be restarting), then releases, again until Redis
// answers: at most tries times, or when tries < 0 until ctx, giveUp or Close
// ends the wait, whose error it returns. A dial that failed sent nothing:
// then it only backs off before the next attempt.
func (l *Lock) clearAttempt(ctx context.Context, owner Owner, ttl time.Duration, lost error, giveUp <-chan time.Time, tries int) error {
	backoff := 20 * time.Millisecond
	if scripts.NotSent(lost) {
		if tries >= 0 {
			return nil
		}
		_, err := l.sleep(ctx, giveUp, nil, backoff)
		return err
	}
	requestID := l.c.newRequestID()
	for try := 0; tries < 0 || try < tries; try++ {
		if _, err := l.sleep(ctx, giveUp, nil, backoff); err != nil {
			return err
		}
		backoff = doubled(backoff, 0, time.Second)
		if _, err := l.release(ctx, owner, ttl, requestID); err == nil || scripts.IsReply(err) {
			return nil
		}
	}
	return nil
}

// sleep waits d, or until wake fires (woken), or until the wait ends: at
// giveUp, with ctx, or with Close, whose error it returns.
func (l *Lock) sleep(ctx context.Context, giveUp <-chan time.Time, wake <-chan struct{}, d time.Duration) (woken bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		return true, nil
	case <-t.C:
		return false, nil
	case <-giveUp:
		return false, l.notAcquired()
	case <-ctx.Done():
		return false, waitError(ctx, l.name)
	case <-l.c.done:
		return false, fmt.Errorf("relock: waiting for %q: %w", l.name, ErrClosed)
	}
}

// undoCancelled releases the hold that an attempt cut short by ctx may
// have taken: the script may have run after the call gave up on its reply,
// and nothing would renew or release that hold, which would block everyone
// until its TTL ended. The owner is the call's own, so a hold of it can only
// be that attempt's. One try, detached from ctx; if it fails, the hold
// expires with its TTL.
func (l *Lock) undoCancelled(ctx context.Context, owner Owner, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	defer cancel()
	if _, err := l.release(ctx, owner, ttl, l.c.newRequestID()); err != nil {
		l.c.opts.Logger.Debug("relock: undoing a cancelled attempt", "lock", l.name, "error", err)
	}
}

// subscribe joins the local queue of waiters on the lock's channel. When
// subscribing fails, waiters poll (bounded as always by the holder's TTL and
// RepollInterval) instead of failing; that is logged once per outage.
func (l *Lock) subscribe(ctx context.Context, owner Owner) (*pubsub.Waiter, error) {
	if hook := l.c.hookBeforeSubscribe; hook != nil {
		hook()
	}
	w, err := l.c.sub.Subscribe(ctx, l.channel(owner))
	if err != nil {
		if ctx.Err() == nil && l.c.degraded.CompareAndSwap(false, true) {
			l.c.opts.Logger.Warn("relock: cannot subscribe to lock channels; waiters poll until it works again", "lock", l.name, "error", err)
		}
		return nil, err
	}
	l.c.degraded.Store(false)
	return w, nil
}
