package reentrant

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/reentrant/internal/attempt"
	"github.com/relock-go/relock/scripts"
)

// PermitExpirableSemaphore is a handle on a semaphore whose permits each
// have an id and may have a lease, Redisson's RPermitExpirableSemaphore: a
// string key N holding the available permits and a sorted set {N}:timeout
// of the taken permits' ids and lease ends. A permit whose lease ended is
// given back by the next call that looks (every script reclaims them
// first). Get one from Client.PermitExpirableSemaphore; its methods are
// safe for concurrent use.
//
// Beyond Redisson: a permit taken without LeaseFor is kept by the
// watchdog, as a lock is. Its lease is the WatchdogTimeout, renewed every
// third of it while this process lives, so a permit whose taker died comes
// back within the timeout instead of never (Redisson's permits without a
// lease never expire), and the permit's context is cancelled with
// ErrLockLost when it is lost.
type PermitExpirableSemaphore struct {
	c     *Client
	name  string // the key: given, mapped by Options.NameMapper
	given string
}

// PermitExpirableSemaphore returns a handle on the permit-expirable
// semaphore stored at key name. It is cheap and does nothing on Redis.
func (c *Client) PermitExpirableSemaphore(name string) *PermitExpirableSemaphore {
	return &PermitExpirableSemaphore{c: c, name: c.key(name), given: name}
}

// Name returns the semaphore's name as given ("" for a nil handle): its
// key, unless Options.NameMapper maps it.
func (s *PermitExpirableSemaphore) Name() string {
	if s == nil {
		return ""
	}
	return s.given
}

func (s *PermitExpirableSemaphore) check(ctx context.Context) error {
	if s == nil {
		return fmt.Errorf("relock: %w: nil semaphore", ErrInvalidArgument)
	}
	return checkHandle(s.c, ctx, "semaphore", s.name, true)
}

// A Permit is one permit taken by this client.
type Permit struct {
	s   *PermitExpirableSemaphore
	id  string
	ctx context.Context
}

// ID returns the permit's id, 32 lowercase hex digits, as Redisson shows
// permit ids. Any process may release the permit by it.
func (p *Permit) ID() string { return p.id }

// Context returns the permit's held context: the ctx given to Acquire,
// cancelled when the permit is released, when its lease ends (cause
// ErrLeaseEnded), when it is lost (cause ErrLockLost: it was released
// elsewhere, or renewal could not be confirmed), or by Close. Do the work
// the permit allows with it.
func (p *Permit) Context() context.Context { return p.ctx }

// Release gives the permit back by its id, as
// PermitExpirableSemaphore.Release does: nil when it was given back, and
// ErrNotHeld only when it is no longer taken. It is sent even after the
// permit's Context ended: a permit whose lease another client set (Java's
// updateLeaseTime) ends its Context with ErrLeaseEnded here, since this
// client no longer keeps it, yet stays taken until that lease ends, or for
// good with no lease; its holder's Release gives it back. An id is never
// drawn twice, so a late Release cannot give back someone else's permit.
// When the permit is gone and its Context had ended, the error wraps that
// cause (ErrLeaseEnded, ErrLockLost) too.
func (p *Permit) Release(ctx context.Context) error {
	if p == nil {
		return fmt.Errorf("relock: %w: nil permit", ErrInvalidArgument)
	}
	err := p.s.Release(ctx, p.id)
	if errors.Is(err, ErrNotHeld) && p.ctx != nil && p.ctx.Err() != nil {
		if cause := context.Cause(p.ctx); errors.Is(cause, ErrLeaseEnded) || errors.Is(cause, ErrLockLost) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
	}
	return err
}

// Acquire takes one permit, waiting as long as none is available: a waiter
// is woken by a release, and tries again at least every RepollInterval or
// when the nearest lease ends. Without LeaseFor the watchdog keeps the
// permit (see PermitExpirableSemaphore); with it, the permit is given back
// when the lease ends. The wait options (NoWait, WaitAtMost, RetryCount,
// RetryDelay) make it give up with ErrNotAcquired; if ctx ends first, it
// returns ctx's error wrapped.
//
// The permit's id is drawn before the first attempt, so an attempt whose
// reply is lost is undone: the permit, if it was taken, is released by id,
// again until Redis answers, before the wait goes on. A call that would
// not wait tries that once; if it gets no answer, the permit comes back
// when its lease ends.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context, opts ...LockOption) (*Permit, error) {
	p, err := s.acquire(ctx, 1, newAcquireConfig(-1, KindPermitSemaphore, opts))
	if err != nil {
		return nil, err
	}
	return p[0], nil
}

// TryAcquire is Acquire with NoWait unless the options say otherwise. It
// returns ok == false and a nil error when no permit was available for as
// long as the limits allowed; any other failure, an outage included, is an
// error.
func (s *PermitExpirableSemaphore) TryAcquire(ctx context.Context, opts ...LockOption) (p *Permit, ok bool, err error) {
	ps, err := s.acquire(ctx, 1, newAcquireConfig(0, KindPermitSemaphore, opts))
	if ok, err = tried(err); ok {
		p = ps[0]
	}
	return p, ok, err
}

// AcquireN takes n permits (n >= 1) at once, all or none, as Acquire takes
// one: it waits until n are available together, and returns them, each
// with its own id, lease and Context. Redisson's acquire(n).
func (s *PermitExpirableSemaphore) AcquireN(ctx context.Context, n int, opts ...LockOption) ([]*Permit, error) {
	return s.acquire(ctx, n, newAcquireConfig(-1, KindPermitSemaphore, opts))
}

// TryAcquireN is AcquireN with NoWait unless the options say otherwise, as
// TryAcquire is Acquire's: ok == false and a nil error when n permits were
// not available together for as long as the limits allowed.
func (s *PermitExpirableSemaphore) TryAcquireN(ctx context.Context, n int, opts ...LockOption) (ps []*Permit, ok bool, err error) {
	ps, err = s.acquire(ctx, n, newAcquireConfig(0, KindPermitSemaphore, opts))
	ok, err = tried(err)
	return ps, ok, err
}

func (s *PermitExpirableSemaphore) acquire(ctx context.Context, n int, cfg acquireConfig) ([]*Permit, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if err := checkCount("permits", int64(n), 1); err != nil {
		return nil, err
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	var w waiting
	w.begin(s.c, ctx, KindPermitSemaphore, s.name, cfg)
	if cfg.retryDelay == 0 {
		w.announcedOn(scripts.SemaphoreChannel(s.name), permitWakes, "")
	}
	a := &permitAcquire{s: s, ctx: ctx, cfg: cfg, ttl: cmp.Or(cfg.lease, s.c.opts.WatchdogTimeout), ids: newPermitIDs(n)}
	if err := w.end(w.run(a, undoable, cfg)); err != nil {
		return nil, err
	}
	return a.permits, nil
}

// permitAcquire is one PermitExpirableSemaphore.Acquire call's side of the
// acquire loop. The permits' ids are drawn before the first attempt, so
// what an attempt whose reply was lost may have taken is undone by id.
type permitAcquire struct {
	s       *PermitExpirableSemaphore
	ctx     context.Context
	cfg     acquireConfig
	ttl     time.Duration
	ids     []string
	redraw  bool      // draw new ids before the next attempt
	sent    time.Time // when the last attempt was sent
	score   string    // the lease end the last attempt wrote
	permits []*Permit // the permits taken
}

func (a *permitAcquire) try(int) outcome {
	if a.redraw {
		a.ids, a.redraw = newPermitIDs(len(a.ids)), false
	}
	a.sent = time.Now()
	acquired, score, nearest, err := a.s.attempt(a.ctx, a.ids, a.ttl)
	a.score = score
	return outcome{err: err, taken: acquired, bound: nearest, abandoned: errors.Is(err, attempt.ErrAbandoned)}
}

func (a *permitAcquire) keep(o outcome) (err error) {
	a.permits, err = a.s.hold(a.ctx, a.ids, a.score, a.cfg.lease, a.ttl, a.sent, o.err)
	if errors.Is(err, errLateReply) || errors.Is(err, errHoldExpired) {
		// The expired permits stay in the timeout set until a script
		// reclaims them, and one reclaims no more than it asks for: taken
		// over by the next attempt, their count would be taken twice and
		// given back once.
		a.redraw = true
	}
	return err
}

// sleepAfter bounds a waiter's sleep by the nearest lease end too: that permit
// comes back then without any message. After a permit that had expired
// before its reply came, the next attempt comes at once.
func (a *permitAcquire) sleepAfter(o outcome) time.Duration {
	if o.taken {
		return 0
	}
	d := a.cfg.sleep(a.s.c.opts.RepollInterval)
	if o.bound >= 0 && o.bound < d && a.cfg.retryDelay == 0 {
		return o.bound + time.Millisecond
	}
	return d
}

func (a *permitAcquire) undo(ctx context.Context, _ int) error { return a.s.undo(ctx, a.ids) }

// attempt runs the acquire script once for permits ids (see attempt.Once):
// an attempt that ctx cut short is undone once its reply comes, the
// permits released if they were taken or may have been.
func (s *PermitExpirableSemaphore) attempt(ctx context.Context, ids []string, ttl time.Duration) (acquired bool, score string, nearest time.Duration, err error) {
	if ctx.Done() == nil { // nothing can cut it short
		return scripts.PermitAcquire(ctx, s.c.runner.Conn(), s.name, ids, ttl, s.c.publish)
	}
	type result struct {
		acquired bool
		score    string
		nearest  time.Duration
		err      error
	}
	r, abandoned := attempt.Once[result](s.c.attempts, ctx, attempt.Funcs[result]{RunFn: func(ctx context.Context) (r result) {
		r.acquired, r.score, r.nearest, r.err = scripts.PermitAcquire(ctx, s.c.runner.Conn(), s.name, ids, ttl, s.c.publish)
		return r
	}, UndoFn: func(ctx context.Context, r result) {
		if r.acquired || (r.err != nil && !scripts.IsReply(r.err) && !scripts.NotSent(r.err)) {
			_ = s.undo(ctx, ids) // one try: if it fails, the lease ends the permits
		}
	}})
	if abandoned {
		return false, "", 0, attempt.Abandoned(ctx)
	}
	return r.acquired, r.score, r.nearest, r.err
}

// undo releases permits ids, which an attempt whose reply was lost may have
// taken (all of them or none), and returns Redis's error.
func (s *PermitExpirableSemaphore) undo(ctx context.Context, ids []string) error {
	ctx, cancel := cleanup(ctx)
	defer cancel()
	_, err := s.releaseIDs(ctx, ids)
	return err
}

// releaseIDs runs the release script for ids: one, or all of many or none.
func (s *PermitExpirableSemaphore) releaseIDs(ctx context.Context, ids []string) (released bool, err error) {
	if len(ids) == 1 {
		return scripts.PermitRelease(ctx, s.c.runner.Conn(), s.name, ids[0], s.c.publish)
	}
	n, err := scripts.PermitReleaseAll(ctx, s.c.runner.Conn(), s.name, ids, s.c.publish)
	return n == int64(len(ids)), err
}

// hold records permits ids, just taken with the given ttl (lease 0: kept
// by the watchdog) and lease end score, after their replica sync, and
// returns them.
func (s *PermitExpirableSemaphore) hold(ctx context.Context, ids []string, score string, lease, ttl time.Duration, sent time.Time, syncErr error) ([]*Permit, error) {
	err := s.c.confirm(ctx, "semaphore", s.name, syncErr, func(ctx context.Context) error {
		_, err := s.releaseIDs(ctx, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	permits := make([]*Permit, len(ids))
	for i, id := range ids {
		held, err := s.c.holds.keep(taken{parent: ctx, given: ctx, kind: KindPermitSemaphore, key: holdKey{name: s.name, owner: id},
			group: renewGroupOf(s.name, renewPermit), lease: lease, ttl: ttl, sent: sent, token: score})
		if err != nil {
			// A reply so late that this permit's lease may have ended (see
			// holdTable.keep): the ones kept go back, and the acquire loop
			// tries again with new ids.
			if i > 0 {
				_ = s.Release(ctx, ids[:i]...)
			}
			return nil, err
		}
		permits[i] = &Permit{s: s, id: id, ctx: held}
	}
	return permits, nil
}

func newPermitIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newPermitID()
	}
	return ids
}

func newPermitID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Release gives back the permits ids, by id, whoever took them: all, or
// none when any of them is not taken (never taken, released already, or
// its lease ended and it was given back), which is ErrNotHeld. This is
// Redisson's tryRelease; its release throws where this returns ErrNotHeld.
// Permits this client holds have their contexts cancelled. Release is
// cleanup: ctx's cancellation does not stop it.
func (s *PermitExpirableSemaphore) Release(ctx context.Context, ids ...string) (err error) {
	if err := s.check(ctx); err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("relock: %w: no permit ids", ErrInvalidArgument)
	}
	if err := checkIDs(ids); err != nil {
		return err
	}
	start := time.Now()
	for _, id := range ids {
		if a, _, _, found := s.c.holds.drop(holdKey{name: s.name, owner: id}); found {
			defer func() {
				s.c.holds.ended(holdKey{name: s.name, owner: id}, a, nil, err, time.Since(start))
				a.cancel(context.Canceled)
			}()
		}
	}
	ctx, cancel := cleanup(ctx)
	defer cancel()
	released, err := s.releaseIDs(ctx, ids)
	switch {
	case err != nil && !errors.Is(err, ErrNotSynced):
		return redisError("semaphore", s.name, err)
	case !released:
		return fmt.Errorf("relock: semaphore %q: %w: a permit is not taken", s.name, ErrNotHeld)
	}
	return nil
}

// checkIDs returns an ErrInvalidArgument error for the first id that is not
// 32 hex digits.
func checkIDs(ids []string) error {
	for _, id := range ids {
		if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
			return fmt.Errorf("relock: %w: permit id %q is not 32 hex digits", ErrInvalidArgument, id)
		}
	}
	return nil
}

// TryRelease is Release reporting "not taken" as false with a nil error
// instead of ErrNotHeld: Redisson's tryRelease.
func (s *PermitExpirableSemaphore) TryRelease(ctx context.Context, ids ...string) (bool, error) {
	err := s.Release(ctx, ids...)
	if errors.Is(err, ErrNotHeld) {
		return false, nil
	}
	return err == nil, err
}

// LeaseTime returns how long permit id's lease has left (for a permit a
// watchdog keeps, until the end of its last renewal: at most
// WatchdogTimeout), or -1 for a permit taken with no lease at all (by
// Java, without one). A permit that is not taken is ErrNotHeld.
// Redisson's getLeaseTime.
func (s *PermitExpirableSemaphore) LeaseTime(ctx context.Context, id string) (time.Duration, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if err := checkIDs([]string{id}); err != nil {
		return 0, err
	}
	left, taken, err := scripts.PermitLeaseTime(ctx, s.c.runner.Conn(), s.name, id, s.c.publish)
	switch {
	case err != nil:
		return 0, redisError("semaphore", s.name, err)
	case !taken:
		return 0, fmt.Errorf("relock: semaphore %q: %w: permit %s is not taken", s.name, ErrNotHeld, id)
	}
	return left, nil
}

// UpdateLease gives permit id a lease of d (at least 1ms) from now, and
// returns ErrNotHeld when it is not taken. A permit this client holds is no
// longer kept by the watchdog: its context ends with the new lease.
func (s *PermitExpirableSemaphore) UpdateLease(ctx context.Context, id string, d time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if d < time.Millisecond {
		return fmt.Errorf("relock: %w: lease %v is below 1ms", ErrInvalidArgument, d)
	}
	sent := time.Now()
	ok, err := scripts.PermitLease(ctx, s.c.runner.Conn(), s.name, id, d, s.c.publish)
	switch {
	case err != nil && !errors.Is(err, ErrNotSynced):
		return redisError("semaphore", s.name, err)
	case !ok:
		return fmt.Errorf("relock: semaphore %q: %w: permit %s is not taken", s.name, ErrNotHeld, id)
	}
	s.c.holds.setLease(holdKey{name: s.name, owner: id}, d, sent)
	return nil
}

// TrySetPermits sets the available permits to n (n >= 0) if the semaphore
// has none set yet, and reports whether it did.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, n int64) (bool, error) {
	if err := s.check(ctx); err != nil {
		return false, err
	}
	if err := checkCount("permits", n, 0); err != nil {
		return false, err
	}
	set, err := scripts.SemaphoreTrySet(ctx, s.c.runner.Conn(), s.name, n, 0, s.c.publish)
	return set, changeError("semaphore", s.name, err)
}

// SetPermits makes the semaphore's size, available plus taken, n (n >= 0):
// the available permits change by the difference, and may go below 0
// while more than n are taken.
func (s *PermitExpirableSemaphore) SetPermits(ctx context.Context, n int64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := checkCount("permits", n, 0); err != nil {
		return err
	}
	return changeError("semaphore", s.name, scripts.PermitSet(ctx, s.c.runner.Conn(), s.name, n, s.c.publish))
}

// AddPermits adds n permits (n < 0 takes them off).
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, n int64) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return changeError("semaphore", s.name, scripts.PermitAdd(ctx, s.c.runner.Conn(), s.name, n, s.c.publish))
}

// Permits returns how many permits are available and how many taken, after
// giving back those whose lease ended.
func (s *PermitExpirableSemaphore) Permits(ctx context.Context) (available, taken int64, err error) {
	if err := s.check(ctx); err != nil {
		return 0, 0, err
	}
	available, taken, err = scripts.PermitCount(ctx, s.c.runner.Conn(), s.name, s.c.publish)
	return available, taken, changeError("semaphore", s.name, err)
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
