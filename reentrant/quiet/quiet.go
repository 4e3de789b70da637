// Package quiet gives a lock a quiet period after a hold that ended
// without a release, as Consul's lock-delay does: for that long nobody
// who takes the lock through this package begins work under it. A holder
// paused past its lease (a GC pause, a stopped VM) may still write when it
// wakes; a store that cannot check fencing tokens is safe from those late
// writes if they land within the quiet period.
//
// Released locks are free at once, as ever: a holder that releases takes
// its marker away first. A hold that expires, or is force-unlocked,
// leaves the marker behind for the quiet period past the lock's expiry
// (relock_quiet:{name}, renewed with the lock by the watchdog). The next
// holder takes the lock as a plain Lock does, then, finding another
// owner's marker, holds it, renewed, until the marker expires, and only
// then returns: waiters wake when the period ends, on a timer, not by
// polling. docs/safety.md says what the quiet period protects and what it
// does not.
//
// It binds only those who take the lock through a quiet Lock. A plain
// Lock of the same name, or a Java Redisson client (the lock is Redisson's
// RLock underneath), takes it at once after an expiry if no quiet holder
// sits on it.
package quiet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// Lock is the plain lock name with a quiet period. It is safe for
// concurrent use; holds are reentrant, as the plain lock's, and counted
// by the Lock that gave them: release each through the Lock that took it
// (one Lock per name and Client, as one handle serves a program).
type Lock struct {
	rt    addon.Runtime
	ok    bool
	lock  *reentrant.Lock
	delay time.Duration

	mu    sync.Mutex
	holds map[string]int // per owner, how many holds this Lock gave
}

// New returns name's plain lock (c.Lock(name)) with a quiet period of
// delay after a hold that ends without a release. A nil Client, or a delay
// below a millisecond, makes every call fail with
// reentrant.ErrInvalidArgument.
func New(c *reentrant.Client, name string, delay time.Duration) *Lock {
	rt, ok := addon.Of(c)
	q := &Lock{rt: rt, ok: ok && delay >= time.Millisecond, delay: delay, holds: map[string]int{}}
	if ok {
		q.lock = c.Lock(name)
	}
	return q
}

// Lock takes the lock as reentrant.Lock.Lock does, then, if another
// owner's hold ended unreleased less than the quiet period ago, holds it
// until the period has passed, and returns. ctx bounds the whole wait; the
// held context is the plain lock's, released with Unlock.
func (q *Lock) Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error) {
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	held, err := q.lock.Lock(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return q.settle(held, true)
}

// TryLock takes the lock as reentrant.Lock.TryLock does, but gives it back
// and reports false when a quiet period is not over.
func (q *Lock) TryLock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, bool, error) {
	if err := q.check(ctx); err != nil {
		return nil, false, err
	}
	held, ok, err := q.lock.TryLock(ctx, opts...)
	if err != nil || !ok {
		return nil, ok, err
	}
	held, err = q.settle(held, false)
	switch {
	case err == errQuiet:
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return held, true, nil
}

// errQuiet: TryLock found a quiet period not over.
var errQuiet = fmt.Errorf("quiet period not over")

// settle marks held's lock as its owner's, waiting out another owner's
// quiet period first (while may), or gives the lock back.
func (q *Lock) settle(held context.Context, may bool) (context.Context, error) {
	owner, _ := reentrant.OwnerFrom(held)
	for {
		wait, holds, err := scripts.QuietMark(held, q.rt.Conn(), q.lock.Key(), owner.String(), q.delay)
		switch {
		case err == nil && !holds:
			err = context.Cause(held)
			if err == nil {
				err = fmt.Errorf("relock: quiet lock %q: %w", q.lock.Name(), reentrant.ErrLockLost)
			}
		case err == nil && wait == 0:
			q.mu.Lock()
			q.holds[owner.String()]++
			q.mu.Unlock()
			return held, nil
		case err == nil && !may:
			err = errQuiet
		case err == nil:
			err = q.sleep(held, wait)
		default:
			err = q.rt.Fail("quiet lock", q.lock.Name(), err)
		}
		if err != nil {
			_ = q.lock.Unlock(held)
			return nil, err
		}
	}
}

// sleep waits d, the quiet period left, holding the lock; it ends early
// with the reason when the hold or its caller's ctx ends, or the Client
// closes.
func (q *Lock) sleep(held context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-held.Done():
		return context.Cause(held)
	case <-q.rt.Closing.Done():
		return fmt.Errorf("relock: quiet lock %q: %w", q.lock.Name(), reentrant.ErrClosed)
	}
}

// Unlock releases held, a hold from Lock or TryLock. The owner's last hold
// takes its marker away first, so that the lock is free at once: no quiet
// period follows a release. A hold that was lost leaves its marker.
func (q *Lock) Unlock(held context.Context) error {
	if err := q.check(held); err != nil {
		return err
	}
	// A hold found lost keeps its marker: its quiet period is what the
	// next holder needs.
	if owner, ok := reentrant.OwnerFrom(held); ok && q.last(owner.String()) && context.Cause(held) == nil {
		if err := scripts.QuietUnmark(held, q.rt.Conn(), q.lock.Key(), owner.String()); err != nil {
			// The marker outlives the lock: the next holder waits a quiet
			// period it need not have. Safe, and said.
			q.rt.Logger.Warn("relock: a quiet lock's marker could not be taken away; the next holder waits its quiet period", "lock", q.lock.Name(), "error", err)
		}
	}
	return q.lock.Unlock(held)
}

// last counts one of owner's holds down and reports whether it was the
// last this Lock gave.
func (q *Lock) last(owner string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.holds[owner] - 1
	if n > 0 {
		q.holds[owner] = n
		return false
	}
	delete(q.holds, owner)
	return n == 0
}

func (q *Lock) check(ctx context.Context) error {
	switch {
	case q == nil || !q.ok:
		return fmt.Errorf("relock: quiet lock: %w: a nil Client, or a quiet period under a millisecond", reentrant.ErrInvalidArgument)
	case ctx == nil:
		return fmt.Errorf("relock: quiet lock %q: %w: a nil ctx", q.lock.Name(), reentrant.ErrInvalidArgument)
	}
	return nil
}
