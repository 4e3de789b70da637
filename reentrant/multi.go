package reentrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/reentrant/internal/retry"
)

// MultiLock takes several locks as one, all or nothing, like Redisson's
// RedissonMultiLock. The locks may live on different clients and servers.
// One owner (from the context) holds all of them.
type MultiLock struct {
	locks []*Lock
}

// NewMultiLock returns a MultiLock over locks.
func NewMultiLock(locks ...*Lock) *MultiLock {
	return &MultiLock{locks: locks}
}

// multiHeld is what a MultiLock's held context carries: the held contexts of
// its parts, for Unlock.
type multiHeld struct {
	m      *MultiLock
	parts  []context.Context
	cancel context.CancelCauseFunc
}

type multiKey struct{}

// Lock takes every lock or none. It never holds one lock while blocking on
// another, so two MultiLocks over overlapping sets cannot deadlock: it waits
// (bounded) for one lock with nothing held, then tries the others without
// waiting; if one is taken, it releases what it holds, backs off briefly
// with jitter and starts again from the lock that was taken. Options apply
// to each part; a wait limit (NoWait, WaitAtMost) bounds the whole call.
//
// The held context is cancelled when any part's is: on loss of any lock
// (cause ErrLockLost), or on Unlock.
func (m *MultiLock) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return m.lock(ctx, newAcquireConfig(-1, KindLock, opts))
}

// lock is Lock with cfg, whose wait is the call's default unless the
// options said otherwise.
func (m *MultiLock) lock(ctx context.Context, cfg acquireConfig) (context.Context, error) {
	cfg.noProgress("multi-lock")
	if cfg.err != nil {
		return nil, cfg.err
	}
	if m == nil {
		return nil, fmt.Errorf("relock: %w: nil MultiLock", ErrInvalidArgument)
	}
	if err := checkParts(ctx, "multi-lock", m.locks); err != nil {
		return nil, err
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = WithOwner(ctx, m.locks[0].r.c.NewOwner())
	}
	var deadline time.Time
	if cfg.wait >= 0 {
		deadline = time.Now().Add(cfg.wait)
	}
	first, backoff := 0, time.Duration(0)
	for {
		held, taken, err := m.round(ctx, cfg, first, deadline)
		switch {
		case err != nil || held != nil:
			return held, err
		case !deadline.IsZero() && !time.Now().Before(deadline):
			return nil, fmt.Errorf("relock: multi-lock: %w", ErrNotAcquired)
		case taken == first:
			continue // an hour's wait for it ran out: wait again
		}
		first = taken
		backoff = retry.Doubled(backoff, 2*time.Millisecond, 64*time.Millisecond)
		if _, err := m.locks[first].r.c.sleep(ctx, m.locks[first].r.name, nil, nil, nil, retry.Jittered(backoff)); err != nil {
			return nil, err
		}
	}
}

// round waits (until deadline, or an hour when there is none, so that the
// caller's loop comes round) for lock first with nothing held, then tries
// the others without waiting. It returns the held context when it took
// them all; else it releases what it took and returns the lock it found
// held, or an error.
func (m *MultiLock) round(ctx context.Context, cfg acquireConfig, first int, deadline time.Time) (context.Context, int, error) {
	wait := time.Hour
	if !deadline.IsZero() {
		wait = max(0, time.Until(deadline))
	}
	held, err := m.locks[first].Lock(ctx, cfg.part(wait)...)
	if errors.Is(err, ErrNotAcquired) && deadline.IsZero() {
		return nil, first, nil
	}
	if err != nil {
		return nil, -1, err
	}
	parts := make([]context.Context, len(m.locks))
	parts[first] = held
	for i, l := range m.locks {
		if i == first {
			continue
		}
		h, err := l.Lock(ctx, cfg.part(0)...)
		if err != nil {
			m.release(parts)
			if errors.Is(err, ErrNotAcquired) {
				return nil, i, nil
			}
			return nil, -1, err
		}
		parts[i] = h
	}
	return m.join(ctx, parts), -1, nil
}

// part returns the options of one part's Lock in a composite lock: the
// lease asked for, and a wait of its own.
func (cfg acquireConfig) part(wait time.Duration) []LockOption {
	o := []LockOption{WaitAtMost(wait)}
	if cfg.lease > 0 {
		o = append(o, LeaseFor(cfg.lease))
	}
	return o
}

// join makes the held context of a whole MultiLock.
func (m *MultiLock) join(ctx context.Context, parts []context.Context) context.Context {
	h := &multiHeld{m: m, parts: parts}
	held, cancel := context.WithCancelCause(context.WithValue(context.WithValue(ctx, multiKey{}, h), givenKey{}, ctx))
	h.cancel = cancel
	for _, p := range parts {
		context.AfterFunc(p, func() { cancel(context.Cause(p)) })
	}
	return held
}

// release gives back the parts held, newest first.
func (m *MultiLock) release(parts []context.Context) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] != nil {
			errs = append(errs, m.locks[i].Unlock(parts[i]))
		}
	}
	return errors.Join(errs...)
}

// TryLock is Lock with NoWait unless the options say otherwise; ok is false
// when the locks could not all be taken within the limits.
func (m *MultiLock) TryLock(ctx context.Context, opts ...LockOption) (held context.Context, ok bool, err error) {
	held, err = m.lock(ctx, newAcquireConfig(0, KindLock, opts))
	if errors.Is(err, ErrNotAcquired) {
		return ctx, false, nil
	}
	if err != nil {
		return ctx, false, err
	}
	return held, true, nil
}

// Unlock releases every lock taken by the Lock that returned ctx (through m
// or any MultiLock over the same locks), and reports every failure.
func (m *MultiLock) Unlock(ctx context.Context) error {
	if m == nil || ctx == nil {
		return fmt.Errorf("relock: %w: multi-lock unlock with a nil MultiLock or context", ErrInvalidArgument)
	}
	h, ok := ctx.Value(multiKey{}).(*multiHeld)
	if !ok || !sameLocks(h.m.locks, m.locks) {
		return fmt.Errorf("relock: multi-lock unlock: %w (not a context this multi-lock returned)", ErrNotHeld)
	}
	defer h.cancel(context.Canceled)
	return m.release(h.parts)
}
