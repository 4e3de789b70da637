package reentrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/relock-go/relock/scripts"
)

// Lock is a handle on one reentrant lock, Redisson's RLock: a Redis hash at
// key Name whose field is the holder's Owner and whose value is its hold
// count. Get one from Client.Lock. A Lock has no state of its own; all its
// methods are safe for concurrent use.
type Lock struct {
	c    *Client
	name string
}

// Name returns the lock's key.
func (l *Lock) Name() string { return l.name }

// maxRepoll bounds every wait for a release, so that a release that sends
// no message (a crashed holder, a Redisson spin lock) is noticed in time.
const maxRepoll = time.Second

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
// ErrClosed).
//
// If ctx ends first, Lock returns promptly with ctx's error wrapped. The wait
// options (NoWait, WaitAtMost, RetryCount) make it give up with
// ErrNotAcquired instead.
func (l *Lock) Lock(ctx context.Context, opts ...Option) (context.Context, error) {
	return l.acquire(ctx, newAcquireConfig(-1, opts))
}

// TryLock is Lock with NoWait unless the options say otherwise. It returns
// ok == false, with ctx and a nil error, when the lock was not acquired
// within the limits.
func (l *Lock) TryLock(ctx context.Context, opts ...Option) (held context.Context, ok bool, err error) {
	held, err = l.acquire(ctx, newAcquireConfig(0, opts))
	if errors.Is(err, ErrNotAcquired) {
		return ctx, false, nil
	}
	if err != nil {
		return ctx, false, err
	}
	return held, true, nil
}

func (l *Lock) acquire(ctx context.Context, cfg acquireConfig) (context.Context, error) {
	if err := l.check(cfg.err); err != nil {
		return nil, err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok {
		owner = l.c.NewOwner()
		ctx = WithOwner(ctx, owner)
	}
	key := holdKey{l.name, owner.id}
	var giveUp <-chan time.Time
	if cfg.wait >= 0 {
		t := time.NewTimer(cfg.wait)
		defer t.Stop()
		giveUp = t.C
	}
	for attempt := 0; ; attempt++ {
		ttl := l.c.acquireTTL(key, cfg.lease)
		sent := time.Now()
		acquired, pttl, err := scripts.Acquire(ctx, l.c.rdb, l.name, owner.id, ttl)
		if err != nil {
			// The outcome is unknown unless Redis replied with an error. A
			// hold that may exist is not recorded, so nothing renews it: it
			// expires after its TTL.
			if ctx.Err() != nil {
				return nil, waitError(ctx, l.name)
			}
			return nil, redisError("lock", l.name, err)
		}
		if acquired {
			return l.c.addHold(ctx, key, cfg.lease, ttl, sent)
		}
		if cfg.retries >= 0 && attempt >= cfg.retries {
			return nil, l.notAcquired()
		}
		wait := maxRepoll
		switch {
		case cfg.retryDelay > 0:
			wait = cfg.retryDelay
		case pttl >= 0 && pttl < wait:
			wait = pttl
		}
		select {
		case <-giveUp:
			return nil, l.notAcquired()
		default:
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-giveUp:
			t.Stop()
			return nil, l.notAcquired()
		case <-ctx.Done():
			t.Stop()
			return nil, waitError(ctx, l.name)
		case <-l.c.done:
			t.Stop()
			return nil, fmt.Errorf("relock: waiting for %q: %w", l.name, ErrClosed)
		}
	}
}

func (l *Lock) notAcquired() error {
	return fmt.Errorf("relock: lock %q: %w", l.name, ErrNotAcquired)
}

// check returns the first reason the handle cannot be used.
func (l *Lock) check(err error) error {
	switch {
	case l.name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
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
	if err := l.check(nil); err != nil {
		return err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return fmt.Errorf("relock: unlock %q: %w (the context carries no owner)", l.name, ErrNotHeld)
	}
	key := holdKey{l.name, owner.id}
	a, restore, found := l.c.dropHold(key)
	if found {
		defer a.cancel(context.Canceled)
	}
	rel := scripts.Release{
		Key:       l.name,
		Owner:     owner.id,
		RequestID: uuid.NewString(),
		Lease:     restore,
		LatchTTL:  releaseWindow,
		Publish:   l.c.publish,
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	defer cancel()
	for backoff := 10 * time.Millisecond; ; backoff *= 2 {
		res, err := rel.Run(ctx, l.c.rdb)
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
		case scripts.IsReply(err) || l.c.checkOpen() != nil:
			return redisError("unlock", l.name, err)
		}
		select {
		case <-ctx.Done():
			return redisError("unlock", l.name, err)
		case <-time.After(backoff):
		}
	}
}
