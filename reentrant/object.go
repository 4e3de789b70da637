package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/scripts"
)

// object is a synchronizer as Redisson's RObject and RExpirable see it:
// its keys, its name first, on which Delete, Expire, ClearExpire and
// Exists act all at once, as the Java class's overrides do. Each
// synchronizer type makes one per call, after checking its handle.
type object struct {
	c    *Client
	what string // "semaphore", "latch", "rate limiter": for errors
	keys []string
	err  error // the handle's check: when set, nothing is sent
}

func (o object) name() string { return o.keys[0] }

// delete deletes every key and reports whether any existed.
func (o object) delete(ctx context.Context) (bool, error) {
	if o.err != nil {
		return false, o.err
	}
	deleted, err := scripts.Delete(ctx, o.c.runner.conn(), o.keys)
	return deleted, changeError(o.what, o.name(), err)
}

// expire sets every key's time to live to ttl (0: clears it) and reports
// whether any key exists to take it.
func (o object) expire(ctx context.Context, ttl time.Duration) (bool, error) {
	if o.err != nil {
		return false, o.err
	}
	changed, err := scripts.Expire(ctx, o.c.runner.conn(), o.keys, ttl)
	return changed, changeError(o.what, o.name(), err)
}

// expireAfter is expire for a ttl the caller gave: at least 1ms (PEXPIRE
// with 0 would delete the keys).
func (o object) expireAfter(ctx context.Context, ttl time.Duration) (bool, error) {
	if o.err == nil && ttl < time.Millisecond {
		return false, fmt.Errorf("relock: %w: time to live %v, want at least 1ms", ErrInvalidArgument, ttl)
	}
	return o.expire(ctx, ttl)
}

// exists reports whether the name's key exists, as Java's isExists.
func (o object) exists(ctx context.Context) (bool, error) {
	if o.err != nil {
		return false, o.err
	}
	found, err := scripts.Exists(ctx, o.c.runner.conn(), o.name())
	if err != nil {
		return false, redisError(o.what, o.name(), err)
	}
	return found, nil
}

func (s *Semaphore) object(ctx context.Context) object {
	if err := s.check(ctx); err != nil {
		return object{err: err}
	}
	return object{c: s.c, what: "semaphore", keys: []string{s.name}}
}

// Delete deletes the semaphore and every permit in it, and reports whether
// it existed. Waiters are not woken: they find no permits, as before.
func (s *Semaphore) Delete(ctx context.Context) (bool, error) {
	return s.object(ctx).delete(ctx)
}

// Expire makes the semaphore expire (be deleted) after ttl (at least 1ms),
// and reports whether it exists.
func (s *Semaphore) Expire(ctx context.Context, ttl time.Duration) (bool, error) {
	return s.object(ctx).expireAfter(ctx, ttl)
}

// ClearExpire makes the semaphore last until deleted, and reports whether
// it had a time to live.
func (s *Semaphore) ClearExpire(ctx context.Context) (bool, error) {
	return s.object(ctx).expire(ctx, 0)
}

// Exists reports whether the semaphore exists (its permits were set).
func (s *Semaphore) Exists(ctx context.Context) (bool, error) {
	return s.object(ctx).exists(ctx)
}

func (s *PermitExpirableSemaphore) object(ctx context.Context) object {
	if err := s.check(ctx); err != nil {
		return object{err: err}
	}
	return object{c: s.c, what: "semaphore", keys: scripts.PermitKeys(s.name)}
}

// Delete deletes the semaphore, its available permits and its taken ones
// (both keys), and reports whether it existed. A taken permit's holder
// learns it at its watchdog's next renewal: its Context is cancelled.
func (s *PermitExpirableSemaphore) Delete(ctx context.Context) (bool, error) {
	return s.object(ctx).delete(ctx)
}

// Expire makes the semaphore, both its keys, expire after ttl (at least
// 1ms), and reports whether it exists.
func (s *PermitExpirableSemaphore) Expire(ctx context.Context, ttl time.Duration) (bool, error) {
	return s.object(ctx).expireAfter(ctx, ttl)
}

// ClearExpire makes the semaphore's keys last until deleted, and reports
// whether either had a time to live.
func (s *PermitExpirableSemaphore) ClearExpire(ctx context.Context) (bool, error) {
	return s.object(ctx).expire(ctx, 0)
}

// Exists reports whether the semaphore exists (its available permits'
// key, as Java's isExists reads it).
func (s *PermitExpirableSemaphore) Exists(ctx context.Context) (bool, error) {
	return s.object(ctx).exists(ctx)
}

func (l *CountDownLatch) object(ctx context.Context) object {
	if err := l.check(ctx); err != nil {
		return object{err: err}
	}
	return object{c: l.c, what: "latch", keys: []string{l.name}}
}

// Expire makes the latch's count expire after ttl (at least 1ms), and
// reports whether it has one. A count that expires opens the latch, but
// wakes nobody: relock's waiters find it open at their next re-poll.
func (l *CountDownLatch) Expire(ctx context.Context, ttl time.Duration) (bool, error) {
	return l.object(ctx).expireAfter(ctx, ttl)
}

// ClearExpire makes the latch's count last until counted down or deleted,
// and reports whether it had a time to live.
func (l *CountDownLatch) ClearExpire(ctx context.Context) (bool, error) {
	return l.object(ctx).expire(ctx, 0)
}

// Exists reports whether the latch has a count (is closed).
func (l *CountDownLatch) Exists(ctx context.Context) (bool, error) {
	return l.object(ctx).exists(ctx)
}

func (r *RateLimiter) object(ctx context.Context) object {
	if err := r.check(ctx); err != nil {
		return object{err: err}
	}
	return object{c: r.c, what: "rate limiter", keys: scripts.RateKeys(r.name, r.c.id)}
}

// Delete deletes the rate limiter's configuration, its shared window and
// this client's own (as Java's delete, other clients' PerClient windows
// stay until their keep-alive ends), and reports whether any existed.
func (r *RateLimiter) Delete(ctx context.Context) (bool, error) {
	return r.object(ctx).delete(ctx)
}

// Expire makes the rate limiter's keys (those Delete deletes) expire after
// ttl (at least 1ms), and reports whether any exists.
func (r *RateLimiter) Expire(ctx context.Context, ttl time.Duration) (bool, error) {
	return r.object(ctx).expireAfter(ctx, ttl)
}

// ClearExpire makes the rate limiter's keys last until deleted, and
// reports whether any had a time to live. Every acquisition with a
// KeepAlive rate sets it again.
func (r *RateLimiter) ClearExpire(ctx context.Context) (bool, error) {
	return r.object(ctx).expire(ctx, 0)
}

// Exists reports whether the rate limiter is configured.
func (r *RateLimiter) Exists(ctx context.Context) (bool, error) {
	return r.object(ctx).exists(ctx)
}
