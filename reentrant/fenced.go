package reentrant

import (
	"context"
	"time"
)

// FencedLock is Redisson's RFencedLock: a reentrant lock whose every
// successful acquire, re-entry included, draws a fencing token from the
// counter redisson_lock_token:{name}. Tokens only grow, across owners,
// clients and processes, so a store that remembers the largest token it has
// accepted and refuses smaller ones turns away a holder whose lock has
// expired meanwhile (a paused process, a lost lease). See docs/fencing.md.
type FencedLock struct {
	l *Lock
}

// lock returns the Lock underneath: nil for a nil FencedLock, whose methods
// then return ErrInvalidArgument.
func (f *FencedLock) lock() *Lock {
	if f == nil {
		return nil
	}
	return f.l
}

// FencedLock returns a handle on the fenced lock name.
func (c *Client) FencedLock(name string) *FencedLock {
	return &FencedLock{l: &Lock{c: c, name: name, kind: fencedLock}}
}

type tokenKey struct{}

// TokenFrom returns the fencing token of the newest fenced acquisition that
// ctx descends from.
func TokenFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}

// Lock is Lock.Lock, and also returns the acquisition's token.
func (f *FencedLock) Lock(ctx context.Context, opts ...Option) (context.Context, int64, error) {
	return f.lock().acquire(ctx, newAcquireConfig(-1, opts))
}

// TryLock is Lock.TryLock, and also returns the acquisition's token.
func (f *FencedLock) TryLock(ctx context.Context, opts ...Option) (held context.Context, token int64, ok bool, err error) {
	held, ok, err = f.lock().TryLock(ctx, opts...)
	if ok {
		token, _ = TokenFrom(held)
	}
	return held, token, ok, err
}

// Name returns the lock's key.
func (f *FencedLock) Name() string { return f.lock().Name() }

// Unlock is Lock.Unlock.
func (f *FencedLock) Unlock(ctx context.Context) error { return f.lock().Unlock(ctx) }

// ForceUnlock is Lock.ForceUnlock.
func (f *FencedLock) ForceUnlock(ctx context.Context) (bool, error) { return f.lock().ForceUnlock(ctx) }

// IsLocked is Lock.IsLocked.
func (f *FencedLock) IsLocked(ctx context.Context) (bool, error) { return f.lock().IsLocked(ctx) }

// IsHeld is Lock.IsHeld.
func (f *FencedLock) IsHeld(ctx context.Context) (bool, error) { return f.lock().IsHeld(ctx) }

// HoldCount is Lock.HoldCount.
func (f *FencedLock) HoldCount(ctx context.Context) (int, error) { return f.lock().HoldCount(ctx) }

// RemainTTL is Lock.RemainTTL.
func (f *FencedLock) RemainTTL(ctx context.Context) (time.Duration, error) {
	return f.lock().RemainTTL(ctx)
}
