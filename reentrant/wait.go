package reentrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/attempt"
	"github.com/relock-go/relock/reentrant/internal/outage"
	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// waiting is what every blocking call shares, whatever it waits for (a
// lock, permits, a latch): the wait limit, the subscription to the
// channel where the thing waited for is announced, and the sleeps between
// attempts. The caller makes the attempts; after one that finds the thing
// taken, pause sleeps until the first of: the bound the attempt gave (a
// lock's PTTL), the re-poll interval (an announcement that never came, a
// message lost with a connection), a wake-up message, the wait limit,
// ctx, or Close. Nothing depends on a message arriving: the bounds hold
// without.
type waiting struct {
	c        *Client
	kind     Kind
	name     string
	channel  string       // where releases are announced
	wakes    pubsub.Wakes // reads its messages; nil: nothing is announced
	ctx      context.Context
	retries  int              // attempts after the first; < 0: no limit
	priority int              // a PriorityLock call's, for the hooks
	timer    *time.Timer      // fires giveUp; nil without a wait limit
	giveUp   <-chan time.Time // the wait limit
	// The channel is subscribed once, after the first attempt that finds
	// the thing taken (wakes != nil).
	subscribe bool
	sub       *pubsub.Waiter
	// passOn, for directed wakes, is the lock whose wakes that no local
	// waiter takes this client passes on (see directed.Handoffs.PassOn).
	passOn string
	// dropped is what the last attempt read of the client's drops (see
	// waitstate.Drops), with directed wakes.
	dropped waitstate.DropMark
	// also is Redisson's lock channel, listened on as well by a wait for a
	// lock with directed wakes, for releases that tell no relock client
	// directly (see directed.go); alsoOn names it until it is subscribed.
	also   *pubsub.Waiter
	alsoOn string
	// alsoWakes reads Redisson's channel; nil: pubsub.LockWakes.
	alsoWakes pubsub.Wakes
	// lingers keeps the channel subscribed a while after its last local
	// waiter leaves, as the wake channel is, so that the next wait joins
	// it before its first attempt (a group lock's value channels).
	lingers bool
	woken   *pubsub.Waiter // the subscription whose wake-up the last attempt followed
	// unavailable is the backoff while the server cannot run scripts.
	unavailable time.Duration
	// unreachable is the last attempt's error while no attempt since has
	// had an answer: a wait that ends then ended for want of Redis, not
	// because the thing was taken, and says so.
	unreachable error
	// outage is the wait as the client's outages count it (outage.Tracker).
	outage outage.Mark
	// For the hooks: when the call started (zero if no hook listens) and
	// how many attempts it made.
	start    time.Time
	attempts int
}

// begin readies w for a call of client c with ctx, taking a thing of the
// given kind, that gives up after wait (< 0: never) or 1+retries attempts
// (retries < 0: no limit).
func (w *waiting) begin(c *Client, ctx context.Context, kind Kind, name string, cfg acquireConfig) {
	*w = waiting{c: c, kind: kind, name: name, ctx: ctx, retries: cfg.retries, priority: cfg.priority, unavailable: 20 * time.Millisecond,
		outage: outage.Mark{Kind: string(kind), Name: name}}
	w.started()
	if cfg.wait >= 0 {
		w.timer = time.NewTimer(cfg.wait)
		w.giveUp = w.timer.C
	}
}

// started tells Hooks.AcquireStarted of the call, and notes when it
// started if a hook will want it (w.start stays zero when none listens).
func (w *waiting) started() {
	h := &w.c.opts.Hooks
	if h.AcquireStarted == nil && h.AcquireEnded == nil {
		return
	}
	w.start = time.Now()
	if h.AcquireStarted != nil {
		h.AcquireStarted(w.ctx, Acquire{Kind: w.kind, Name: w.name, Priority: w.priority, Start: w.start})
	}
}

// ended tells Hooks.AcquireEnded of the call's end with err; Held says
// whether it took something its kind records as a hold.
func (w *waiting) ended(err error) {
	if h := w.c.opts.Hooks.AcquireEnded; h != nil {
		h(w.ctx, Acquire{Kind: w.kind, Name: w.name, Priority: w.priority, Start: w.start, Waited: time.Since(w.start),
			Attempts: w.attempts, Held: w.kind.holds() && err == nil, Err: err})
	}
}

// announcedOn makes the wait listen for releases on channel, read by wakes;
// with directed wakes, passOn is the lock whose wakes it passes on when no
// local waiter takes them.
func (w *waiting) announcedOn(channel string, wakes pubsub.Wakes, passOn string) {
	w.channel, w.wakes, w.passOn, w.subscribe = channel, wakes, passOn, true
}

// listenAlso makes the wait listen on Redisson's lock channel as well, from
// its next pause on (see waiting.also). It is done once per wait.
func (w *waiting) listenAlso(channel string) {
	if w.also == nil && w.alsoOn == "" {
		w.alsoOn = channel
	}
}

// heard records whether an attempt got an answer from Redis: any reply,
// except one saying the server cannot run scripts for now. An attempt the
// caller gave up on (attempt.ErrAbandoned) tells nothing new.
func (w *waiting) heard(err error) {
	w.attempts++
	if errors.Is(err, attempt.ErrAbandoned) {
		return
	}
	w.unreachable = nil
	if err != nil && (!scripts.IsReply(err) || scripts.IsUnavailable(err)) {
		// A Lock with no wait limit would otherwise wait through an
		// outage in silence: the client says so, once for all its waits.
		w.unreachable = err
		w.c.outages.Failing(&w.outage, err)
		return
	}
	w.c.outages.Answered(&w.outage)
}

// notRun reports whether an attempt that failed with err surely did not
// run, and may be tried again after a backoff: the server could not run
// scripts for now (see scripts.IsUnavailable), or the connection could not
// be dialled.
func notRun(err error) bool { return scripts.IsUnavailable(err) || scripts.NotSent(err) }

// backOff sleeps before the next attempt while the server cannot run
// scripts or cannot be reached (the last attempt failed with err): 20ms,
// doubling up to 1s while it is not heard, at most retry.UpPause after it
// refused (it is up, and will soon serve).
func (w *waiting) backOff(err error) error {
	if pacing(err) == retry.Refused {
		w.unavailable = min(w.unavailable, retry.UpPause)
	}
	serr := w.sleepOut(w.unavailable)
	w.unavailable = retry.Doubled(w.unavailable, 0, time.Second)
	return serr
}

// pause follows attempt number attempt, which found the thing taken, and
// returns nil when the caller should try again: after the first such
// attempt it subscribes and returns at once (a release between the attempt
// and the subscription would go unheard); after the others it sleeps at
// most next(). It returns ErrNotAcquired once the limits run out.
func (w *waiting) pause(attempt int, next func() time.Duration) error {
	w.woken = nil
	if w.retries >= 0 && attempt >= w.retries {
		return w.notAcquired()
	}
	select {
	case <-w.giveUp:
		return w.notAcquired()
	default:
	}
	if subscribed, err := w.subscribeNext(); err != nil || subscribed && w.recheck() {
		return err // subscribed: again at once, as a release may have gone unheard
	}
	var err error
	if w.woken, err = w.sleep(next()); err != nil {
		return err
	}
	// A subscription that failed is tried again after each sleep, not
	// given up for the rest of the wait: a fair lock's head that only
	// polls holds every waiter behind it up.
	w.dropFailed()
	if w.sub == nil && w.wakes != nil {
		w.subscribe = true
	}
	if w.also == nil && w.alsoOn == alsoTried {
		w.alsoOn = "" // listened on again from the next attempt that calls for it
	}
	if hook := w.c.opts.Hooks.Woken; w.woken != nil && hook != nil {
		hook(w.ctx, w.kind, w.name)
	}
	return nil
}

// recheck reports whether the wait, just subscribed, looks again at once:
// a release before the subscription was confirmed went unheard. With
// directed wakes (passOn set) the release told the client, not a waiter,
// and one look serves all the client's waiters on that channel: one that
// wins moves the client to the end of the waiters' set, one that loses
// registers it again. So only the waiter the subscriber picked looks (see
// pubsub.Waiter.Recheck); the others wait for a wake. So too on Redisson's
// channel (waiting.also): a foreign release wakes one waiter of each
// client, and one that came while no waiter was queued there is a gap the
// next subscriber looks into. And a waiter looks whose failed attempt may
// have been followed by a local winner's drop of the client from the
// waiters' set, made while this waiter was not on the channel yet (see
// waitstate.Drops): its registration may be gone.
func (w *waiting) recheck() bool {
	return w.passOn == "" || w.sub == nil || w.sub.Recheck() || w.also != nil && w.also.Recheck() ||
		w.c.handoffs.Drops.Since(w.dropped)
}

// subscribeNext makes the subscription the wait is due to make, if any:
// its channel's first (see pause), or Redisson's lock channel as well (see
// waiting.also). It reports whether one was made; one that fails leaves the
// wait to poll, and err is set only when ctx ended. One the server has not
// confirmed within the re-poll interval (a slow link, the subscriber
// reconnecting) is kept: the wait polls, and its confirmation wakes it for
// an attempt at once, since a release before it went unheard. Giving it up
// instead cost a whole re-poll after the link came back, for everyone
// queued behind a fair lock's head.
func (w *waiting) subscribeNext() (subscribed bool, err error) {
	alsoDue := w.alsoOn != "" && w.alsoOn != alsoTried
	if !w.subscribe && !alsoDue {
		return false, nil
	}
	if hook := w.c.hookBeforeSubscribe; hook != nil {
		hook()
	}
	if w.subscribe {
		w.subscribe = false
		var unclaimed func()
		switch {
		case w.passOn != "":
			unclaimed = w.c.handoffs.PassOn(w.passOn)
		case w.lingers:
			unclaimed = func() {} // a wake with no waiter here has no one else to go to
		}
		subscribed, err = w.subscribeTo(&w.sub, w.channel, w.wakes, unclaimed)
		if !subscribed || !alsoDue {
			return subscribed, err
		}
		// Both channels at once, so that one look after them serves.
	}
	channel := w.alsoOn
	w.alsoOn = alsoTried
	// A foreign release that no waiter of this client takes needs no
	// passing on: every client listening heard it. The handler only keeps
	// the channel lingering, as the wake channel does.
	wakes := w.alsoWakes
	if wakes == nil {
		wakes = pubsub.LockWakes
	}
	alsoSubscribed, err := w.subscribeTo(&w.also, channel, wakes, func() {})
	return subscribed || alsoSubscribed, err
}

// subscribeTo subscribes *sub to channel (see subscribeNext).
func (w *waiting) subscribeTo(sub **pubsub.Waiter, channel string, wakes pubsub.Wakes, unclaimed func()) (subscribed bool, err error) {
	if *sub, err = w.c.subscribe(w.ctx, w.name, channel, wakes, unclaimed); err == nil {
		return true, nil
	} // else *sub is set if unconfirmed
	if w.ctx.Err() != nil {
		return false, waitError(w.ctx, w.name)
	}
	return false, nil
}

// alsoTried marks waiting.alsoOn once its subscription was tried.
const alsoTried = "-"

// dropFailed leaves the subscriptions that failed after they were made
// (see pubsub.Waiter.Failed): the wait subscribes anew. Such a failure
// woke the wait, for no release.
func (w *waiting) dropFailed() {
	if w.sub != nil && w.sub.Failed() {
		w.sub.Leave()
		if n := w.sub.TakeGiven(); n != 0 && w.passOn != "" {
			w.c.handoffs.TakeBack(w.name, n) // a handoff the wait did not take
		}
		w.sub = nil
	}
	if w.also != nil && w.also.Failed() {
		w.also.Leave()
		w.also, w.alsoOn = nil, "" // listened on again from the next attempt that calls for it
	}
	if w.woken != nil && w.woken.Failed() {
		w.woken = nil
	}
}

// end finishes the wait with err, its result: an error met while Redis did
// not answer says so, and the channel's queue is left, handing on a wake-up
// that was not used.
func (w *waiting) end(err error) error {
	if w.timer != nil {
		w.timer.Stop()
	}
	if err != nil && w.unreachable != nil && !errors.Is(err, w.unreachable) {
		err = w.outageError(err)
	}
	if err != nil && w.woken != nil {
		w.woken.PassOn() // the wake-up was not used: the next waiter may
	}
	for _, sub := range []*pubsub.Waiter{w.sub, w.also} {
		if sub != nil {
			sub.Leave()
		}
	}
	w.c.outages.Left(&w.outage)
	w.ended(err)
	return err
}

// outageError is the error of a wait that ended (err) while Redis did not
// answer. It wraps the last attempt's error, so errors.Is reaches the
// connection error, and it does not wrap ErrNotAcquired: the thing was not
// found taken by someone else, Redis could not be asked.
func (w *waiting) outageError(err error) error {
	if errors.Is(err, ErrNotAcquired) {
		return fmt.Errorf("relock: %s %q: no answer from Redis before the wait ran out: %w", w.kind.noun(), w.name, w.unreachable)
	}
	return fmt.Errorf("%w (last attempt: %w)", err, w.unreachable) // err says "relock:"
}

func (w *waiting) notAcquired() error {
	return fmt.Errorf("relock: %s %q: %w", w.kind.noun(), w.name, ErrNotAcquired)
}

// sleep is Client.sleep within the wait's limits, woken by either
// subscription; woken is the one that woke it.
func (w *waiting) sleep(d time.Duration) (woken *pubsub.Waiter, err error) {
	var wake, wake2 <-chan struct{}
	if w.sub != nil {
		wake = w.sub.C
	}
	if w.also != nil {
		wake2 = w.also.C
	}
	which, err := w.c.sleep(w.ctx, w.name, w.giveUp, wake, wake2, d)
	if err == errGaveUp {
		err = w.notAcquired()
	}
	switch which {
	case 1:
		woken = w.sub
	case 2:
		woken = w.also
	}
	return woken, err
}

// sleepOut is Client.sleep within the wait's limits, which no wake-up cuts
// short.
func (w *waiting) sleepOut(d time.Duration) error {
	_, err := w.c.sleep(w.ctx, w.name, w.giveUp, nil, nil, d)
	if err == errGaveUp {
		err = w.notAcquired()
	}
	return err
}

// errGaveUp is Client.sleep's error when the wait limit ran out; waiting.sleep
// turns it into ErrNotAcquired with the name of what was waited for.
var errGaveUp = errors.New("wait limit reached")

// sleep waits d, or until wake or wake2 fires (woken: 1 or 2), or until
// the wait for name ends: at giveUp (errGaveUp), with ctx, or with Close,
// whose error it returns.
func (c *Client) sleep(ctx context.Context, name string, giveUp <-chan time.Time, wake, wake2 <-chan struct{}, d time.Duration) (woken int, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		return 1, nil
	case <-wake2:
		return 2, nil
	case <-t.C:
		return 0, nil
	case <-giveUp:
		return 0, errGaveUp
	case <-ctx.Done():
		return 0, waitError(ctx, name)
	case <-c.done:
		return 0, fmt.Errorf("relock: waiting for %q: %w", name, ErrClosed)
	}
}

// subscribe joins the local queue of waiters on channel, for a wait on
// name. When subscribing fails, waiters poll (bounded as always by the
// holder's TTL and RepollInterval) instead of failing; that is logged once
// per outage. A subscription not confirmed within RepollInterval is
// returned with its error (pubsub.ErrUnconfirmed) unless ctx ended.
func (c *Client) subscribe(ctx context.Context, name, channel string, wakes pubsub.Wakes, unclaimed func()) (*pubsub.Waiter, error) {
	// Bounded by the re-poll interval: a waiter whose subscription is not
	// confirmed by then polls until it is (see waiting.subscribeNext),
	// rather than wait on.
	sctx, cancel := context.WithTimeout(ctx, c.opts.RepollInterval)
	defer cancel()
	w, err := c.sub.Subscribe(sctx, channel, wakes, unclaimed)
	if err != nil {
		if ctx.Err() != nil {
			if w != nil {
				w.Leave()
			}
			return nil, err
		}
		// A refusal is told once; a subscription Redis did not confirm
		// in time is part of an outage the client tells once (outages),
		// or of a slow moment, and goes in the debug log.
		switch {
		case scripts.IsNoPermission(err):
			if c.degraded.CompareAndSwap(false, true) {
				c.opts.Logger.Warn("relock: the Redis user may not subscribe to release channels; waiters poll every RepollInterval", "name", name, "error", err)
			}
		default:
			c.opts.Logger.Debug("relock: a subscription to a release channel is not confirmed yet; its waiter polls until it is", "name", name, "error", err)
		}
		return w, err // w is set when unconfirmed: it is woken once confirmed
	}
	c.degraded.Store(false)
	return w, nil
}
