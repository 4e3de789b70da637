package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/relock-go/relock/scripts"
)

// Semaphore is a handle on a counting semaphore, Redisson's RSemaphore: a
// string key holding the number of available permits. Permits belong to
// nobody, as in java.util.concurrent.Semaphore: any caller may release
// any number, and nothing renews or reclaims a permit whose taker died
// (PermitExpirableSemaphore does). Get one from Client.Semaphore; its
// methods are safe for concurrent use.
//
// The key starts missing, which is 0 permits: set them with TrySetPermits
// or AddPermits. Every increase is published on redisson_sc:{name}, which
// wakes waiters, Java Redisson's included.
type Semaphore struct {
	c     *Client
	name  string // the key: given, mapped by Options.NameMapper
	given string
}

// Semaphore returns a handle on the semaphore stored at key name. It is
// cheap and does nothing on Redis.
func (c *Client) Semaphore(name string) *Semaphore {
	return &Semaphore{c: c, name: c.key(name), given: name}
}

// Name returns the semaphore's name as given ("" for a nil Semaphore):
// its key, unless Options.NameMapper maps it.
func (s *Semaphore) Name() string {
	if s == nil {
		return ""
	}
	return s.given
}

func (s *Semaphore) check(ctx context.Context) error {
	if s == nil {
		return fmt.Errorf("relock: %w: nil semaphore", ErrInvalidArgument)
	}
	return checkHandle(s.c, ctx, "semaphore", s.name, true)
}

// Acquire takes n permits (n >= 1), all at once, waiting as long as fewer
// are available: a waiter is woken by the release that publishes enough,
// and tries again at least every RepollInterval. The wait options (NoWait,
// WaitAtMost, RetryCount, RetryDelay) make it give up with ErrNotAcquired;
// LeaseFor is an ErrInvalidArgument (these permits have no lease). If ctx
// ends first, it returns ctx's error wrapped.
//
// A server that cannot run scripts for now, or cannot be dialled, is tried
// again after a backoff while the wait lasts. Any other error from Redis is
// returned at once. When an attempt's reply is lost with its connection,
// Acquire returns that error and the permits may have been taken: nothing
// owns them, so nothing can tell (PermitExpirableSemaphore can).
func (s *Semaphore) Acquire(ctx context.Context, n int64, opts ...LockOption) error {
	return s.acquire(ctx, n, newAcquireConfig(-1, KindSemaphore, opts))
}

// TryAcquire is Acquire with NoWait unless the options say otherwise. It
// returns false and a nil error when the permits were not available for as
// long as the limits allowed; any other failure, an outage included, is an
// error.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64, opts ...LockOption) (bool, error) {
	return tried(s.acquire(ctx, n, newAcquireConfig(0, KindSemaphore, opts)))
}

// tried turns an acquire's error into TryLock's form: false and no error
// when the limits ran out.
func tried(err error) (bool, error) {
	if errors.Is(err, ErrNotAcquired) {
		return false, nil
	}
	return err == nil, err
}

func (s *Semaphore) acquire(ctx context.Context, n int64, cfg acquireConfig) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := cfg.noLease("semaphore"); err != nil {
		return err
	}
	if err := checkCount("permits", n, 1); err != nil {
		return err
	}
	var w waiting
	w.begin(s.c, ctx, KindSemaphore, s.name, cfg)
	if cfg.retryDelay == 0 {
		w.announcedOn(scripts.SemaphoreChannel(s.name), permitWakes, "")
	}
	return w.end(w.run(&semaphoreAcquire{s: s, ctx: ctx, n: n, cfg: cfg}, sendOnce, cfg))
}

// semaphoreAcquire is one Semaphore.Acquire call's side of the acquire
// loop.
type semaphoreAcquire struct {
	keepsNothing
	s   *Semaphore
	ctx context.Context
	n   int64
	cfg acquireConfig
}

func (a *semaphoreAcquire) try(int) outcome {
	acquired, err := scripts.SemaphoreAcquire(a.ctx, a.s.c.runner.Conn(), a.s.name, a.n)
	return outcome{err: err, taken: acquired, bound: -1}
}

func (a *semaphoreAcquire) sleepAfter(outcome) time.Duration {
	return a.cfg.sleep(a.s.c.opts.RepollInterval)
}

// keep confirms the permits' replica sync, giving them back if it failed.
func (a *semaphoreAcquire) keep(o outcome) error {
	s := a.s
	return s.c.confirm(a.ctx, "semaphore", s.name, o.err, func(ctx context.Context) error {
		_, err := scripts.SemaphoreRelease(ctx, s.c.runner.Conn(), s.name, a.n, s.c.publish)
		return err
	})
}

// permitWakes reads a semaphore's channel: the payload is the permits now
// available (or, from some of Redisson's scripts, just released), and a
// Java waiter wakes that many of its waiters at most (SemaphorePubSub
// .onMessage); so does this one.
func permitWakes(message string) int {
	n, err := strconv.Atoi(message)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Release gives back n permits (n >= 1), whoever took them, and wakes
// waiters. Nothing checks that they were taken, as in Redisson and
// java.util.concurrent.Semaphore: a Release without its Acquire adds
// permits (use PermitExpirableSemaphore to have each permit accounted
// for). It is cleanup: ctx's cancellation does not stop it. While the
// server cannot run it, it is tried again for up to 10s; once sent it is
// not sent again: when its reply is lost, the error says so, and the
// permits may have been given back.
func (s *Semaphore) Release(ctx context.Context, n int64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkCount("permits", n, 1); err != nil {
		return err
	}
	return changeError("semaphore", s.name, s.c.untilRun(ctx, s.name, func(ctx context.Context) error {
		_, err := scripts.SemaphoreRelease(ctx, s.c.runner.Conn(), s.name, n, s.c.publish)
		return err
	}))
}

// ReleaseIfExists gives back n permits (n >= 1) as Release does, and is
// tried again as Release is, but only while the semaphore's key exists;
// it reports whether it gave them back. A semaphore that was deleted, or
// whose TrySetPermitsFor time ran out, is not brought back by a late
// release. Redisson's releaseIfExists.
func (s *Semaphore) ReleaseIfExists(ctx context.Context, n int64) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if err := checkCount("permits", n, 1); err != nil {
		return false, err
	}
	var released bool
	err := s.c.untilRun(ctx, s.name, func(ctx context.Context) (err error) {
		released, err = scripts.SemaphoreReleaseIfExists(ctx, s.c.runner.Conn(), s.name, n, s.c.publish)
		return err
	})
	return released, changeError("semaphore", s.name, err)
}

// TrySetPermits sets the available permits to n (n >= 0) if the semaphore
// has none set yet (its key is missing), and reports whether it did.
func (s *Semaphore) TrySetPermits(ctx context.Context, n int64) (bool, error) {
	return s.trySet(ctx, n, 0)
}

// TrySetPermitsFor is TrySetPermits for a semaphore that lasts ttl (> 0):
// its key, and so its permits, taken or not, are deleted ttl after it is
// set, as with Redisson's trySetPermits(permits, timeToLive).
func (s *Semaphore) TrySetPermitsFor(ctx context.Context, n int64, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("relock: %w: time to live %v, want > 0", ErrInvalidArgument, ttl)
	}
	return s.trySet(ctx, n, ttl)
}

func (s *Semaphore) trySet(ctx context.Context, n int64, ttl time.Duration) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if err := checkCount("permits", n, 0); err != nil {
		return false, err
	}
	set, err := scripts.SemaphoreTrySet(ctx, s.c.runner.Conn(), s.name, n, ttl, s.c.publish)
	return set, changeError("semaphore", s.name, err)
}

// AddPermits adds n permits (n < 0 takes them off, and the count may go
// below 0, as Redisson allows) and wakes waiters when some are available.
func (s *Semaphore) AddPermits(ctx context.Context, n int64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	_, err := scripts.SemaphoreRelease(ctx, s.c.runner.Conn(), s.name, n, s.c.publish)
	return changeError("semaphore", s.name, err)
}

// Available returns the permits available now (0 when none were set).
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	return getCount(ctx, s.c, "semaphore", s.name)
}

// Drain takes every available permit and returns how many there were.
func (s *Semaphore) Drain(ctx context.Context) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	n, err := scripts.SemaphoreDrain(ctx, s.c.runner.Conn(), s.name)
	return n, changeError("semaphore", s.name, err)
}

// getCount reads a count kept in a string key: 0 when it is missing.
func getCount(ctx context.Context, c *Client, what, name string) (int64, error) {
	n, err := scripts.Count(ctx, c.runner.Conn(), name)
	if err != nil {
		return 0, redisError(what, name, err)
	}
	return n, nil
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
