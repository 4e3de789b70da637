package reentrant

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// ErrClosed). Work under the lock with the held context.
//
// An acquire whose reply comes after the new hold's local deadline (a stall
// of 0.9 TTL) is not trusted, since the lock may be gone by then: one
// renewal asks Redis whether the hold is still there. If it is, it is kept,
// with its deadline counted from the renewal; if not, the wait goes on as
// after an attempt that found the lock taken (a call that would not wait
// returns an error that is not ErrNotAcquired).
//
// If ctx ends first, Lock returns promptly with ctx's error wrapped. An
// attempt in flight then is heard out in the background, and whatever it
// did (a hold taken, a fair queue joined) is undone once its reply comes,
// not before: an undo sent at once could reach Redis ahead of the attempt,
// on another of the client's connections. The wait options (NoWait,
// WaitAtMost, RetryCount) make it give up with ErrNotAcquired instead.
//
// A waiting Lock rides out a failover or restart: a server that cannot run
// scripts for now (LOADING, READONLY, ...) is tried again after a backoff,
// and an attempt lost with its connection is undone (its hold, if it took
// one, released) before the wait goes on. Only an owner Lock made itself
// can be undone: with an owner from WithOwner, a lost attempt's error is
// returned, and a hold it may have taken expires after its TTL. Other
// errors from Redis (WRONGTYPE, a bad ACL) are returned at once. A wait
// that ends while Redis gives no answer returns an error that wraps the
// last connection error (and ctx's, if ctx ended it), never ErrNotAcquired:
// "held by someone else" and "could not reach Redis" are different answers.
func (l *Lock) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return l.acquire(ctx, newAcquireConfig(-1, opts))
}

// TryLock is Lock with NoWait unless the options say otherwise. It returns
// ok == false, with ctx and a nil error, when the lock was held by someone
// else for as long as the limits allowed; any other failure, an outage
// included, is an error.
func (l *Lock) TryLock(ctx context.Context, opts ...LockOption) (held context.Context, ok bool, err error) {
	held, err = l.acquire(ctx, newAcquireConfig(0, opts))
	if errors.Is(err, ErrNotAcquired) {
		return ctx, false, nil
	}
	if err != nil {
		return ctx, false, err
	}
	return held, true, nil
}

// lockAttempt is what one run of a lock's acquire script did.
type lockAttempt struct {
	acquired bool
	pttl     time.Duration
	token    int64
	holder   string // a holder's field, told with directed wakes
	err      error
}

// attempt runs the lock's acquire script once (see attemptOnce).
func (c *cycle) attempt(ttl time.Duration) lockAttempt {
	ctx := c.ctx
	if c.cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.timeout)
		defer cancel()
	}
	t := try{l: c.l, owner: c.owner, private: c.private, ttl: ttl, cfg: c.cfg}
	if c.directed {
		t.wake = c.wakeArgs()
		c.dropping = t.wake.Settle == scripts.SettleDrop
		if hook := c.l.c.hookBeforeSend; hook != nil {
			hook()
		}
	}
	if ctx.Done() == nil { // nothing can cut it short
		return t.run(ctx)
	}
	r, abandoned := attemptOnce(c.l.c, ctx, t.run, t.undo)
	if abandoned {
		c.abandoned = true
		r.err = abandonedError(ctx)
	}
	return r
}

// try is one attempt of a cycle: what running it and undoing it need, by
// value, so that an undo in the background holds nothing of the cycle.
type try struct {
	l       *Lock
	owner   Owner
	private bool // see cycle
	ttl     time.Duration
	cfg     acquireConfig
	wake    scripts.Wake // with directed wakes (Client set)
}

// run runs the acquire script; an acquire that replicas did not confirm is
// rolled back (see unsynced).
func (t try) run(ctx context.Context) (r lockAttempt) {
	l := t.l
	a := acquireArgs{name: l.name, owner: t.owner.id, ttl: t.ttl, turn: l.fairTurn(t.cfg), join: t.cfg.wait != 0, fresh: t.private, pub: l.c.publish}
	a.wake = t.wake
	r = l.kind.spec().acquire(ctx, l.c.scriptConn(), a)
	if r.acquired && r.err != nil {
		r.err = l.unsynced(ctx, t.owner, t.ttl, r.err)
	}
	return r
}

// undo undoes what an attempt the caller gave up on did, once its reply
// came: a hold it took is released (see undoHold), and a fair lock's
// waiter leaves the queue it may have joined.
func (t try) undo(ctx context.Context, r lockAttempt) {
	t.undoHold(ctx, r)
	if t.l.kind.spec().queued && t.cfg.wait != 0 {
		t.l.leaveQueue(ctx, t.owner, t.l.fairTurn(t.cfg))
	}
}

// undoHold releases the hold attempt r took: one hold, so a re-entry keeps
// the others. An attempt that got no answer may have taken one; it is
// released for a private owner only, whose hold can only be the attempt's.
// One try, detached from ctx; if it fails, the hold expires with its TTL.
func (t try) undoHold(ctx context.Context, r lockAttempt) {
	l := t.l
	lost := r.err != nil && !r.acquired && !scripts.IsReply(r.err) && !scripts.NotSent(r.err)
	if !(r.acquired && r.err == nil) && !(lost && t.private) {
		return
	}
	ctx, cancel := cleanup(ctx)
	defer cancel()
	if _, err := l.release(ctx, t.owner, t.ttl, l.c.newRequestID(), false); err != nil {
		l.c.opts.Logger.Debug("relock: undoing an attempt cut short", "lock", l.name, "error", err)
	}
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
	if _, err := l.release(ctx, owner, ttl, l.c.newRequestID(), false); err != nil {
		l.c.opts.Logger.Warn("relock: rolling back an acquire replicas did not confirm; the hold expires with its TTL", "lock", l.name, "error", err)
	}
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		return fmt.Errorf("relock: %w (%v)", ErrSyncUnavailable, syncErr)
	}
	return fmt.Errorf("relock: lock %q: %w; acquire rolled back", l.name, syncErr) // wraps ErrNotSynced
}

// release runs the lock's release script once for owner's newest hold;
// restore is the TTL left to the holds that remain. requestID names the
// release for the unlock latch: the same id across retries of one release.
// again says whether that request may have been sent before.
func (l *Lock) release(ctx context.Context, owner Owner, restore time.Duration, requestID string, again bool) (scripts.Released, error) {
	rdb := l.c.scriptConn()
	rel := scripts.Release{
		Key:       l.name,
		Owner:     owner.id,
		RequestID: requestID,
		Again:     again,
		Lease:     restore,
		LatchTTL:  releaseWindow,
		Publish:   l.publish(),
		Directed:  l.directed(),
	}
	res, err := l.kind.spec().release(ctx, rdb, rel)
	if err == nil {
		l.c.latches.drop(rel.Latch()) // answered: it will not be sent again
	}
	return res, err
}

// directed reports whether the lock's waiters take directed wakes (see
// scripts.Wake): a plain or fenced lock, not a spin lock, on a client whose
// scripts can count who hears a channel (see Client.New).
func (l *Lock) directed() bool {
	return l.c.directed && l.kind.spec().directed && l.spin == nil
}

// publish is the command the lock's releases announce themselves with.
func (l *Lock) publish() scripts.Publish {
	if l.spin != nil {
		return scripts.PublishNone
	}
	return l.c.publish
}

func (l *Lock) notAcquired() error {
	return fmt.Errorf("relock: lock %q: %w", l.name, ErrNotAcquired)
}

// check returns the first reason the handle cannot be used with ctx.
func (l *Lock) check(ctx context.Context, err error) error {
	switch {
	case l == nil:
		return fmt.Errorf("relock: %w: nil lock", ErrInvalidArgument)
	case !l.c.usable():
		return fmt.Errorf("relock: %w: lock %q comes from a nil Client or one not made by New", ErrInvalidArgument, l.name)
	case ctx == nil:
		return fmt.Errorf("relock: %w: nil context", ErrInvalidArgument)
	case l.name == "":
		return fmt.Errorf("relock: %w: empty lock name", ErrInvalidArgument)
	case zeroOwner(ctx):
		return fmt.Errorf("relock: %w: lock %q: the context carries the zero Owner (use one from NewOwner or ParseOwner)", ErrInvalidArgument, l.name)
	case l.c.cluster && !scripts.SlotSafe(l.name):
		return fmt.Errorf("relock: %w: lock name %q has a \"{\" but no non-empty hash tag, so its channel would fall in another cluster slot", ErrInvalidArgument, l.name)
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
// What its result says of the work done under the lock:
//   - nil: the hold was given back; the work ran under the lock, unless
//     the held context was cancelled before (see context.Cause).
//   - ErrLeaseEnded: a LeaseFor lease ended before Unlock: from its local
//     deadline the lock may have been another's, so work done after it was
//     not protected. Nothing is sent to Redis.
//   - ErrLockLost: the hold was lost (wrapping ErrNotRenewed or
//     ErrUnconfirmed), found so now or before: work done after the loss
//     was not protected.
//   - ErrNotHeld: the owner held nothing (the context Lock was given
//     instead of the one it returned, or a second Unlock); nothing changed.
//   - another error, wrapping the connection's or the server's: whether
//     the hold was given back is unknown; if not, it expires with its TTL.
//
// Unlock is cleanup, so ctx's cancellation does not stop it (the held
// context is often already cancelled); only its values are used. When a reply
// is lost it retries, with the same request id, which Redis answers from
// the unlock latch instead of releasing twice: for up to 10s, and never
// past the hold's local deadline (see LeaseDeadline), when the lock may
// have expired; the error then wraps ErrLockLost and the last attempt's
// error. A hold this client has already declared lost (the held context
// was cancelled with ErrLockLost) is not sent for: Unlock returns that
// cause at once.
func (l *Lock) Unlock(ctx context.Context) error {
	return l.unlock(ctx, releaseWindow)
}

// unlock is Unlock, retrying for at most window.
func (l *Lock) unlock(ctx context.Context, window time.Duration) (err error) {
	if err := l.check(ctx, nil); err != nil {
		return err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok && l.c.lockedWith(ctx, l.name) {
		// The commonest slip: Unlock(ctx) where Unlock(held) was meant. It
		// is logged, since a deferred Unlock's error is often dropped, and
		// the lock would stay held and renewed until Close.
		l.c.opts.Logger.Error("relock: Unlock was given the context passed to Lock, not the one Lock returned; the lock stays held", "lock", l.name)
		return fmt.Errorf("relock: unlock %q: %w (this is the context given to Lock; pass the one Lock returned)", l.name, ErrNotHeld)
	}
	if !ok {
		return fmt.Errorf("relock: unlock %q: %w (the context carries no owner)", l.name, ErrNotHeld)
	}
	key := holdKey{l.name, l.field(owner)}
	a, restore, lease, found := l.c.dropHold(key)
	if !found && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrLeaseEnded) {
			// This client gave the hold up already (its key vanished, no
			// renewal was confirmed in time, or its lease ended): nothing
			// of it is left to give back, and during an outage trying
			// would only wait.
			return fmt.Errorf("relock: unlock %q: %w", l.name, cause)
		}
	}
	if found {
		start := time.Now()
		defer func() {
			var cause error
			if errors.Is(err, ErrLockLost) {
				cause = err
			}
			l.c.holdEnded(key, a, cause, err, time.Since(start))
			a.cancel(context.Canceled)
		}()
	}
	requestID := l.c.newRequestID()
	// The first attempt needs no timer of its own: rueidis fails it when the
	// connection stalls (ConnWriteTimeout, 10s by default). Retries run
	// within the window, and not past the hold's local deadline: after it
	// the key may have expired and another may hold the lock, so there is
	// nothing left to give back.
	ctx = context.WithoutCancel(ctx)
	var deadline time.Time // the hold's, read once a retry needs it
	for try, backoff := 0, time.Duration(0); ; try++ {
		res, err := l.release(ctx, owner, restore, requestID, try > 0)
		if err == nil {
			return l.released(res, found, key)
		}
		if !l.retryRelease(err) {
			return redisError("unlock", l.name, err)
		}
		if try == 0 {
			end := time.Now().Add(window)
			if found {
				deadline = l.c.watchdog.Deadline(lease)
			}
			if found && deadline.Before(end) {
				end = deadline
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, end)
			defer cancel()
		}
		backoff = doubled(backoff, 10*time.Millisecond, time.Second)
		if _, serr := l.c.sleep(ctx, l.name, nil, nil, nil, backoff); serr != nil {
			if found && !time.Now().Before(deadline) {
				return fmt.Errorf("relock: unlock %q: %w: the hold's lease ran out before its release could be confirmed: %w", l.name, ErrLockLost, err)
			}
			return redisError("unlock", l.name, err)
		}
	}
}

// released turns a release's reply into Unlock's result. found says
// whether this client had the hold.
func (l *Lock) released(res scripts.Released, found bool, key holdKey) error {
	switch {
	case res != scripts.NotHeld:
		return nil
	case found:
		// Redis has no hold where this client had one: every other
		// acquisition of it here is lost too.
		l.c.loseHolds(func(k holdKey) bool { return k == key }, ErrLockLost)
		return fmt.Errorf("relock: unlock %q: %w", l.name, ErrLockLost)
	}
	return fmt.Errorf("relock: unlock %q: %w", l.name, ErrNotHeld)
}

// retryRelease reports whether a release that failed with err may be sent
// again: it got no reply (the unlock latch answers a retry of a release
// that ran), or the server could not run scripts for now (the release did
// not run); and the client is open.
func (l *Lock) retryRelease(err error) bool {
	return l.c.checkOpen() == nil && (!scripts.IsReply(err) || scripts.IsUnavailable(err))
}
