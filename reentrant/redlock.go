package reentrant

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/scripts"
)

// Redlock is the Redlock algorithm over N independent Redis masters, one
// Lock per master (each from a Client on its own server). Each master holds
// an ordinary reentrant hash, so the same owner can re-enter.
//
// An attempt asks every master at once, each bounded by a tenth of the
// lease. It succeeds when a quorum (N/2+1) granted the lock and time is
// left: validity = lease - elapsed - drift, drift being lease/100 + 2ms.
// Otherwise it releases on every master that may hold it and retries after
// a random delay. Redlock holds are leases, never renewed.
type Redlock struct {
	locks []*Lock
}

// NewRedlock returns a Redlock over locks, one per independent master.
func NewRedlock(locks ...*Lock) *Redlock {
	return &Redlock{locks: locks}
}

// ErrNoQuorum is wrapped in the error of a Redlock attempt that ran out of
// tries or time without a quorum; errors.Is(err, ErrNotAcquired) holds too.
var ErrNoQuorum = fmt.Errorf("no quorum of Redlock masters: %w", ErrNotAcquired)

type redlockKey struct{}

type redlockHeld struct {
	r      *Redlock
	lease  time.Duration
	parts  []context.Context // per master: held context, or nil
	maybe  []bool            // per master: the outcome is unknown
	cancel context.CancelCauseFunc
}

// Lock takes the Redlock and returns the held context. Its deadline is the
// end of the validity: how long from now the lock is safe to use
// (held.Deadline()). The held context ends then (cause ErrLockLost), or when
// fewer than a quorum of the masters still hold it, or on Unlock. LeaseFor
// sets the lease (default: the first client's WatchdogTimeout); NoWait,
// WaitAtMost and RetryCount bound the attempts; RetryDelay replaces the
// random delay between attempts.
func (r *Redlock) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	cfg := newAcquireConfig(-1, KindLock, opts)
	cfg.noProgress("Redlock")
	if cfg.err != nil {
		return nil, cfg.err
	}
	if r == nil {
		return nil, fmt.Errorf("relock: %w: nil Redlock", ErrInvalidArgument)
	}
	if err := checkParts(ctx, "Redlock", r.locks); err != nil {
		return nil, err
	}
	lease := cfg.lease
	if lease == 0 {
		lease = r.locks[0].r.c.opts.WatchdogTimeout
	}
	if _, ok := OwnerFrom(ctx); !ok {
		ctx = WithOwner(ctx, r.locks[0].r.c.NewOwner())
	}
	var deadline time.Time
	if cfg.wait >= 0 {
		deadline = time.Now().Add(cfg.wait)
	}
	// Redlock's own loop, not the acquire loop (acquire.go): each attempt
	// is a round of one TryLock per master, each of which runs that loop
	// once, and a round that fails gives back what it took before the next.
	for attempt := 0; ; attempt++ {
		held, err := r.attempt(ctx, lease)
		switch {
		case err == nil:
			return held, nil
		case ctx.Err() != nil:
			return nil, waitError(ctx, "redlock")
		case cfg.retries >= 0 && attempt >= cfg.retries, !deadline.IsZero() && !time.Now().Before(deadline):
			return nil, err
		}
		if _, err := r.locks[0].r.c.sleep(ctx, r.locks[0].r.name, nil, nil, nil, retryDelay(cfg, deadline)); err != nil {
			return nil, err
		}
	}
}

// retryDelay is the pause between two Redlock attempts: RetryDelay, or a
// random 50-150ms so that rivals drift apart, cut short by the deadline.
func retryDelay(cfg acquireConfig, deadline time.Time) time.Duration {
	delay := cfg.retryDelay
	if delay == 0 {
		delay = 50*time.Millisecond + rand.N(100*time.Millisecond)
	}
	if !deadline.IsZero() {
		delay = min(delay, time.Until(deadline))
	}
	return delay
}

// attempt is one round of the algorithm.
func (r *Redlock) attempt(ctx context.Context, lease time.Duration) (context.Context, error) {
	n := len(r.locks)
	quorum := n/2 + 1
	h := &redlockHeld{r: r, lease: lease, parts: make([]context.Context, n), maybe: make([]bool, n)}
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i, l := range r.locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, ok, err := l.TryLock(ctx, LeaseFor(lease), attemptTimeout(lease/10))
			switch {
			case ok:
				h.parts[i] = held
			case err != nil:
				errs[i] = err
				h.maybe[i] = !scripts.IsReply(err) && !scripts.NotSent(err)
			}
		}()
	}
	wg.Wait()
	granted := 0
	for _, p := range h.parts {
		if p != nil {
			granted++
		}
	}
	validity := lease - time.Since(start) - (lease/100 + 2*time.Millisecond)
	if granted < quorum || validity <= 0 {
		h.release(ctx, lease)
		return nil, fmt.Errorf("relock: %w: %d of %d masters granted the lock (quorum %d), validity %v: %w",
			ErrNoQuorum, granted, n, quorum, validity, errors.Join(errs...))
	}
	lost := fmt.Errorf("relock: %w: redlock validity ended", ErrLockLost)
	valid, stop := context.WithDeadlineCause(context.WithValue(context.WithValue(ctx, redlockKey{}, h), givenKey{}, ctx), start.Add(validity), lost)
	held, cancel := context.WithCancelCause(valid)
	h.cancel = func(cause error) { cancel(cause); stop() }
	var alive atomic.Int64
	alive.Store(int64(granted))
	for _, p := range h.parts {
		if p != nil {
			context.AfterFunc(p, func() {
				if alive.Add(-1) < int64(quorum) {
					cancel(context.Cause(p))
				}
			})
		}
	}
	return held, nil
}

// release gives back the lock on every master that holds it, and tries
// once, briefly, on every master that may hold it (its reply was lost): a
// hold there is a lease that expires anyway. A master that no longer has the
// hold (it restarted, or the lease ran out there) is not an error: the
// quorum is what counts.
func (h *redlockHeld) release(ctx context.Context, lease time.Duration) error {
	var errs []error
	for i, l := range h.r.locks {
		switch {
		case h.parts[i] != nil:
			err := l.Unlock(h.parts[i])
			if err != nil && !errors.Is(err, ErrNotHeld) && !errors.Is(err, ErrLockLost) {
				errs = append(errs, err)
			}
		case h.maybe[i]:
			l.ref().unlock(ctx, lease/10)
		}
	}
	return errors.Join(errs...)
}

// Unlock releases the Redlock taken by the Lock that returned ctx (through
// r or any Redlock over the same locks) on every master, and reports every
// failure.
func (r *Redlock) Unlock(ctx context.Context) error {
	if r == nil || ctx == nil {
		return fmt.Errorf("relock: %w: Redlock unlock with a nil Redlock or context", ErrInvalidArgument)
	}
	h, ok := ctx.Value(redlockKey{}).(*redlockHeld)
	if !ok || !sameLocks(h.r.locks, r.locks) {
		return fmt.Errorf("relock: redlock unlock: %w (not a context this Redlock returned)", ErrNotHeld)
	}
	defer h.cancel(context.Canceled)
	return h.release(ctx, h.lease)
}
