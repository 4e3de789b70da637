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

// Lock is a handle on one reentrant lock, Redisson's RLock: a Redis hash at
// key Name whose field is the holder's Owner and whose value is its hold
// count. Get one from Client.Lock. A Lock has no state of its own; all its
// methods are safe for concurrent use.
type Lock struct {
	c    *Client
	name string
	kind lockKind
	spin *Backoff // waiters back off instead of subscribing; releases announce nothing (SpinLock)
}

// lockKind says which scripts, hash field and channel a Lock uses.
type lockKind uint8

const (
	plainLock  lockKind = iota // RLock
	fencedLock                 // RFencedLock: each acquire draws a token
	readLock                   // RReadWriteLock's read side
	writeLock                  // RReadWriteLock's write side
	fairLock                   // RFairLock: waiters queue in Redis, in order
)

// field returns the hash field that records owner's holds.
func (l *Lock) field(owner Owner) string {
	if l.kind == writeLock {
		return scripts.WriteField(owner.id)
	}
	return owner.id
}

// channel returns the channel on which owner, waiting, hears releases.
func (l *Lock) channel(owner Owner) string {
	switch l.kind {
	case readLock, writeLock:
		return scripts.RWChannel(l.name)
	case fairLock:
		return scripts.FairChannel(l.name, owner.id)
	}
	return scripts.LockChannel(l.name)
}

// Name returns the lock's key ("" for a nil Lock).
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Lock takes the lock, waiting as long as it is held by another owner, and
// returns the held context: ctx, carrying the owner (a new one if ctx had
// none), and cancelled when the hold ends. Pass it to the work done under
// the lock, and to Unlock.
//
// If ctx's owner already holds the lock, Lock takes it again at once
// (reentrancy): each Lock needs its own Unlock.
//
// Without LeaseFor the lock is kept by the watchdog for as long as it is
// held. The held context is cancelled when Unlock gives the hold back
// (cause context.Canceled), or as soon as the client learns the lock may be
// lost (cause ErrLockLost; see context.Cause), or by Close (cause
// ErrClosed). It can be cancelled from the start: when the acquire's reply
// came after the hold's local deadline (a network stall of 0.9 TTL), the
// lock may already be gone. Work under the lock with the held context.
//
// If ctx ends first, Lock returns promptly with ctx's error wrapped. The wait
// options (NoWait, WaitAtMost, RetryCount) make it give up with
// ErrNotAcquired instead.
//
// A waiting Lock rides out a failover or restart: a server that cannot run
// scripts for now (LOADING, READONLY, ...) is tried again after a backoff,
// and an attempt lost with its connection is undone (its hold, if it took
// one, released) before the wait goes on. Only an owner Lock made itself
// can be undone: with an owner from WithOwner, a lost attempt's error is
// returned, and a hold it may have taken expires after its TTL. Other
// errors from Redis (WRONGTYPE, a bad ACL) are returned at once.
func (l *Lock) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	held, _, err := l.acquire(ctx, newAcquireConfig(-1, opts))
	return held, err
}

// TryLock is Lock with NoWait unless the options say otherwise. It returns
// ok == false, with ctx and a nil error, when the lock was not acquired
// within the limits.
func (l *Lock) TryLock(ctx context.Context, opts ...Option) (held context.Context, ok bool, err error) {
	held, _, err = l.acquire(ctx, newAcquireConfig(0, opts))
	if errors.Is(err, ErrNotAcquired) {
		return ctx, false, nil
	}
	if err != nil {
		return ctx, false, err
	}
	return held, true, nil
}

// acquire takes the lock; for a fenced lock it also returns the token drawn.
func (l *Lock) acquire(ctx context.Context, cfg acquireConfig) (held context.Context, token int64, err error) {
	if err := l.check(ctx, cfg.err); err != nil {
		return nil, 0, err
	}
	owner, ok := OwnerFrom(ctx)
	private := !ok // an owner made for this call, used by nothing else
	if private {
		owner = l.c.NewOwner()
		ctx = WithOwner(ctx, owner)
	}
	key := holdKey{l.name, l.field(owner)}
	var giveUp <-chan time.Time
	if cfg.wait >= 0 {
		t := time.NewTimer(cfg.wait)
		defer t.Stop()
		giveUp = t.C
	}
	// A waiter subscribes to the lock's channel once, after its first failed
	// attempt, unless it was asked to retry at fixed delays or spins.
	var w *pubsub.Waiter
	subscribe := cfg.retryDelay == 0 && l.spin == nil
	spin := time.Duration(0)
	woken := false // the last attempt followed a wake-up
	// unreachable is the last attempt's error while no attempt since has
	// had a reply: a wait that ends then ended for want of Redis, not
	// because the lock was held, and says so.
	var unreachable error
	defer func() {
		if err != nil && unreachable != nil && !errors.Is(err, unreachable) {
			err = outageError(l.name, err, unreachable)
		}
		if w != nil {
			if err != nil && woken {
				w.PassOn() // the wake-up was not used: the next waiter may
			}
			w.Leave()
		}
		if err != nil && l.kind == fairLock && cfg.wait != 0 {
			l.leaveQueue(ctx, owner, l.fairTurn(cfg))
		}
	}()
	unavailable := 20 * time.Millisecond // backoff while Redis cannot run scripts
	for attempt := 0; ; attempt++ {
		ttl := l.c.acquireTTL(key, cfg.lease)
		sent := time.Now()
		acquired, pttl, token, err := l.attempt(ctx, owner, ttl, cfg)
		unreachable = nil
		if err != nil && (!scripts.IsReply(err) || scripts.IsUnavailable(err)) {
			unreachable = err
		}
		if err != nil {
			// The outcome is unknown unless Redis replied with an error. A
			// hold that may exist is not recorded, so nothing renews it: it
			// expires after its TTL.
			if ctx.Err() != nil {
				if private && !scripts.IsReply(err) && !scripts.NotSent(err) {
					l.undoCancelled(ctx, owner, ttl)
				}
				return nil, 0, waitError(ctx, l.name)
			}
			waiting := cfg.timeout == 0 && cfg.wait != 0 && (cfg.retries < 0 || attempt < cfg.retries)
			if waiting && scripts.IsUnavailable(err) {
				// The server cannot run scripts for now (loading, demoted
				// by a failover); the script did not run. Back off and
				// wait on.
				if _, err := l.sleep(ctx, giveUp, nil, unavailable); err != nil {
					return nil, 0, err
				}
				unavailable = min(2*unavailable, time.Second)
				continue
			}
			if !private || cfg.timeout > 0 || !l.transient(err) {
				return nil, 0, redisError("lock", l.name, err)
			}
			// The connection broke (a failover, a restart). The owner is
			// this call's own, so a hold of it in Redis can only be the
			// lost attempt's: it is released, and the wait goes on.
			if !waiting {
				l.clearAttempt(ctx, owner, ttl, err, nil, 1)
				return nil, 0, redisError("lock", l.name, err)
			}
			if err := l.clearAttempt(ctx, owner, ttl, err, giveUp, -1); err != nil {
				return nil, 0, err
			}
			continue
		}
		if acquired {
			if l.kind == fencedLock {
				ctx = context.WithValue(ctx, tokenKey{}, token)
			}
			held, err := l.c.addHold(ctx, key, l.c.group(l), cfg.lease, ttl, sent)
			return held, token, err
		}
		woken = false
		if cfg.retries >= 0 && attempt >= cfg.retries {
			return nil, 0, l.notAcquired()
		}
		select {
		case <-giveUp:
			return nil, 0, l.notAcquired()
		default:
		}
		if subscribe {
			subscribe = false
			if w, err = l.subscribe(ctx, owner); err == nil {
				continue // subscribed: try again before waiting
			}
			if ctx.Err() != nil {
				return nil, 0, waitError(ctx, l.name)
			}
		}
		wait := l.c.opts.RepollInterval
		switch {
		case cfg.retryDelay > 0:
			wait = cfg.retryDelay
		case l.spin != nil:
			spin = l.spin.next(spin)
			wait = spin
		case l.kind == fairLock && pttl == 0:
			// Queued, and the lock is free (or expiring now) but the
			// turn is another waiter's. Redisson's Java waiters retry at
			// once on this reply; relock backs off from 1ms up to the
			// re-poll interval instead: its own turn comes with a message.
			spin = fairIdle(spin, l.c.opts.RepollInterval)
			wait, pttl = spin, -1
		}
		if cfg.retryDelay == 0 && pttl >= 0 && pttl < wait {
			wait = pttl
		}
		var wake <-chan struct{}
		if w != nil {
			wake = w.C
		}
		if woken, err = l.sleep(ctx, giveUp, wake, wait); err != nil {
			return nil, 0, err
		}
		if hook := l.c.hookWoken; woken && hook != nil {
			hook(ctx)
		}
	}
}

// outageError is the error of a wait that ended (err) while Redis did not
// answer (last, the last attempt's error). It wraps last, so errors.Is
// reaches the connection error, and it does not wrap ErrNotAcquired: the
// lock was not found held by someone else, Redis could not be asked.
func outageError(name string, err, last error) error {
	if errors.Is(err, ErrNotAcquired) {
		return fmt.Errorf("relock: lock %q: no answer from Redis before the wait ran out: %w", name, last)
	}
	return fmt.Errorf("%w (last attempt: %w)", err, last)
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
		backoff = min(2*backoff, time.Second)
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

// fairTurn is the turn a fair lock's waiter is given in the queue,
// Redisson's threadWaitTime: the wait limit when the call has one, as with
// Redisson's tryLock(waitTime, ...), else Options.FairWaitTimeout.
func (l *Lock) fairTurn(cfg acquireConfig) time.Duration {
	if cfg.wait > 0 {
		return cfg.wait
	}
	return l.c.opts.FairWaitTimeout
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

// leaveQueue takes owner out of a fair lock's queue after a wait that ended
// without the lock, as Redisson's acquireFailed does, so that those behind
// it need not wait for its deadline: a waiter left at the head of the queue
// would hold up everyone for its whole turn. It runs even when ctx is
// cancelled. When Redis gives no answer, it tries again in the background,
// for up to the release window or until Close, so that the wait that gave
// up returns at once; leaving twice is the same as leaving once. If every
// try fails, the owner's deadline drops it from the queue.
func (l *Lock) leaveQueue(ctx context.Context, owner Owner, turn time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	if l.leftQueue(ctx, owner, turn) {
		cancel()
		return
	}
	l.c.background(func() {
		defer cancel()
		defer context.AfterFunc(l.c.closing, cancel)()
		for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			select {
			case <-ctx.Done():
				l.c.opts.Logger.Warn("relock: could not leave a fair lock's queue; the entry is dropped when its turn ends", "lock", l.name)
				return
			case <-l.c.done:
				return
			case <-time.After(backoff):
			}
			if l.leftQueue(ctx, owner, turn) {
				return
			}
		}
	})
}

// leftQueue runs the leave script once and reports whether it is done:
// Redis answered, or no later try could help.
func (l *Lock) leftQueue(ctx context.Context, owner Owner, turn time.Duration) bool {
	err := scripts.FairLeave(ctx, l.c.rdb, l.name, owner.id, turn, l.c.publish)
	return err == nil || (scripts.IsReply(err) && !scripts.IsUnavailable(err)) || l.c.checkOpen() != nil
}

// attempt runs the lock's acquire script once.
func (l *Lock) attempt(ctx context.Context, owner Owner, ttl time.Duration, cfg acquireConfig) (acquired bool, pttl time.Duration, token int64, err error) {
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	rdb := *l.c.scripted.Load()
	switch l.kind {
	case fencedLock:
		acquired, pttl, token, err = scripts.FencedAcquire(ctx, rdb, l.name, owner.id, ttl)
	case readLock:
		acquired, pttl, err = scripts.ReadAcquire(ctx, rdb, l.name, owner.id, ttl)
	case writeLock:
		acquired, pttl, err = scripts.WriteAcquire(ctx, rdb, l.name, owner.id, ttl)
	case fairLock:
		// A call that would not wait tries once and leaves no queue
		// entry behind, as Redisson's tryLock() does.
		acquired, pttl, err = scripts.FairAcquire(ctx, rdb, l.name, owner.id, ttl, l.fairTurn(cfg), cfg.wait != 0)
	default:
		acquired, pttl, err = scripts.Acquire(ctx, rdb, l.name, owner.id, ttl)
	}
	if acquired && err != nil {
		err = l.unsynced(ctx, owner, ttl, err)
	}
	return acquired, pttl, token, err
}

// unsynced handles an acquire that replicas did not confirm: kept when the
// server refuses WAIT and sync is not required (sync turns off), else rolled
// back with one release of the new hold, the acquire's TTL left to any
// outer hold. The error it returns means the lock is not held.
func (l *Lock) unsynced(ctx context.Context, owner Owner, ttl time.Duration, syncErr error) error {
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		if err := l.c.syncRefused(syncErr); err == nil {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	defer cancel()
	if _, err := l.release(ctx, owner, ttl, l.c.newRequestID()); err != nil {
		l.c.opts.Logger.Warn("relock: rolling back an acquire replicas did not confirm; the hold expires with its TTL", "lock", l.name, "error", err)
	}
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		return fmt.Errorf("%w (%v)", ErrSyncUnavailable, syncErr)
	}
	return fmt.Errorf("%w (%v)", ErrNotSynced, syncErr)
}

// release runs the lock's release script once for owner's newest hold;
// restore is the TTL left to the holds that remain. requestID names the
// release for the unlock latch: the same id across retries of one release.
func (l *Lock) release(ctx context.Context, owner Owner, restore time.Duration, requestID string) (scripts.Released, error) {
	rdb := *l.c.scripted.Load()
	rel := scripts.Release{
		Key:       l.name,
		Owner:     owner.id,
		RequestID: requestID,
		Lease:     restore,
		LatchTTL:  releaseWindow,
		Publish:   l.publish(),
	}
	switch l.kind {
	case readLock:
		return scripts.ReadRelease(ctx, rdb, rel)
	case writeLock:
		return scripts.WriteRelease(ctx, rdb, rel)
	case fairLock:
		return scripts.FairRelease(ctx, rdb, rel)
	}
	return rel.Run(ctx, rdb)
}

// publish is the command the lock's releases announce themselves with.
func (l *Lock) publish() scripts.Publish {
	if l.spin != nil {
		return scripts.PublishNone
	}
	return l.c.publish
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

func (l *Lock) notAcquired() error {
	return fmt.Errorf("relock: lock %q: %w", l.name, ErrNotAcquired)
}

// check returns the first reason the handle cannot be used with ctx.
func (l *Lock) check(ctx context.Context, err error) error {
	switch {
	case l == nil:
		return fmt.Errorf("%w: nil lock", ErrInvalidArgument)
	case !l.c.usable():
		return fmt.Errorf("%w: lock %q comes from a nil Client or one not made by New", ErrInvalidArgument, l.name)
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	case l.name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	case l.c.cluster && !scripts.SlotSafe(l.name):
		return fmt.Errorf("%w: lock name %q has a \"{\" but no non-empty hash tag, so its channel would fall in another cluster slot", ErrInvalidArgument, l.name)
	case err != nil:
		return err
	}
	return l.c.checkOpen()
}

// releaseWindow bounds how long Unlock keeps trying to release when the
// outcome of an attempt is unknown, and how long Redis remembers a release
// request (the unlock latch).
const releaseWindow = 10 * time.Second

// Unlock gives back one hold of ctx's owner. The last hold deletes the key
// and wakes a waiter; holds that remain keep their TTL. The held context of
// the newest acquisition is cancelled.
//
// It returns ErrNotHeld when the owner holds nothing, which changes nothing,
// and ErrLockLost when this client believed it held the lock but Redis no
// longer had the hold.
//
// Unlock is cleanup, so ctx's cancellation does not stop it (the held
// context is often already cancelled); only its values are used. When a reply
// is lost it retries, for up to 10s, with the same request id, which Redis
// answers from the unlock latch instead of releasing twice.
func (l *Lock) Unlock(ctx context.Context) error {
	return l.unlock(ctx, releaseWindow)
}

// unlock is Unlock, retrying for at most window.
func (l *Lock) unlock(ctx context.Context, window time.Duration) error {
	if err := l.check(ctx, nil); err != nil {
		return err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return fmt.Errorf("relock: unlock %q: %w (the context carries no owner)", l.name, ErrNotHeld)
	}
	key := holdKey{l.name, l.field(owner)}
	a, restore, found := l.c.dropHold(key)
	if found {
		defer a.cancel(context.Canceled)
	}
	requestID := l.c.newRequestID()
	// The first attempt needs no timer of its own: rueidis fails it when the
	// connection stalls (ConnWriteTimeout, 10s by default). Retries run
	// within the window.
	ctx = context.WithoutCancel(ctx)
	var giveUp time.Time
	for backoff := 10 * time.Millisecond; ; backoff *= 2 {
		res, err := l.release(ctx, owner, restore, requestID)
		switch {
		case err == nil && res != scripts.NotHeld:
			return nil
		case err == nil && found:
			// Redis has no hold where this client had one: every other
			// acquisition of it here is lost too.
			l.c.loseHolds(func(k holdKey) bool { return k == key }, ErrLockLost)
			return fmt.Errorf("relock: unlock %q: %w", l.name, ErrLockLost)
		case err == nil:
			return fmt.Errorf("relock: unlock %q: %w", l.name, ErrNotHeld)
		case scripts.IsUnavailable(err) && l.c.checkOpen() == nil:
			// The server cannot run scripts for now (loading, demoted by
			// a failover); the release did not run, so trying again is
			// safe for every kind of lock.
		case scripts.IsReply(err) || l.c.checkOpen() != nil:
			return redisError("unlock", l.name, err)
		}
		if giveUp.IsZero() {
			giveUp = time.Now().Add(window)
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, giveUp)
			defer cancel()
		}
		select {
		case <-ctx.Done():
			return redisError("unlock", l.name, err)
		case <-time.After(backoff):
		}
	}
}

// fairIdle is the next wait of a fair waiter whose turn has not come while
// the lock is free: double prev, from 1ms up to repoll.
func fairIdle(prev, repoll time.Duration) time.Duration {
	return min(max(2*prev, time.Millisecond), repoll)
}
