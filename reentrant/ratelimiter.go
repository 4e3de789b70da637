package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/scripts"
)

// RateLimiter is a handle on a sliding-window rate limiter, Redisson's
// RRateLimiter: at most Rate.Permits permits are taken in any
// Rate.Interval, across every client (or, with PerClient, within each
// Client). It announces nothing: a caller that must wait sleeps for as long
// as the limiter says. Get one from Client.RateLimiter; its methods are
// safe for concurrent use.
type RateLimiter struct {
	c     *Client
	name  string // the key: given, mapped by Options.NameMapper
	given string
}

// Rate is a rate limiter's configuration.
type Rate struct {
	// Permits is how many permits the window holds: the rate. At least 1.
	Permits int64
	// Interval is the window's length, in whole milliseconds (at least 1).
	Interval time.Duration
	// PerClient gives each Client its own window (Redisson's PER_CLIENT,
	// by the Client's ID); false shares one among all (OVERALL).
	PerClient bool
	// KeepAlive, when set, expires the limiter's keys after that long
	// unused; at least Interval. 0 keeps them.
	KeepAlive time.Duration
}

// RateLimiter returns a handle on the rate limiter stored at key name (its
// configuration hash; the window keys derive from it). It is cheap and
// does nothing on Redis.
func (c *Client) RateLimiter(name string) *RateLimiter {
	return &RateLimiter{c: c, name: c.key(name), given: name}
}

// Name returns the rate limiter's name as given ("" for a nil
// RateLimiter): its key, unless Options.NameMapper maps it.
func (r *RateLimiter) Name() string {
	if r == nil {
		return ""
	}
	return r.given
}

func (r *RateLimiter) check(ctx context.Context) error {
	if r == nil {
		return fmt.Errorf("relock: %w: nil rate limiter", ErrInvalidArgument)
	}
	return checkHandle(r.c, ctx, "rate limiter", r.name, true)
}

func (rate Rate) check() error {
	switch {
	case rate.Permits < 1:
		return fmt.Errorf("relock: %w: Rate.Permits %d is below 1", ErrInvalidArgument, rate.Permits)
	case rate.Interval < time.Millisecond:
		return fmt.Errorf("relock: %w: Rate.Interval %v is below 1ms", ErrInvalidArgument, rate.Interval)
	case rate.KeepAlive != 0 && rate.KeepAlive < rate.Interval:
		return fmt.Errorf("relock: %w: Rate.KeepAlive %v is below Rate.Interval %v", ErrInvalidArgument, rate.KeepAlive, rate.Interval)
	}
	return nil
}

func (rate Rate) wire() scripts.Rate {
	return scripts.Rate{Permits: rate.Permits, Interval: rate.Interval, PerClient: rate.PerClient, KeepAlive: rate.KeepAlive}
}

// TrySetRate configures the limiter unless it is configured, and reports
// whether it did.
func (r *RateLimiter) TrySetRate(ctx context.Context, rate Rate) (bool, error) {
	return r.set(ctx, rate, true)
}

// SetRate configures the limiter, replacing any configuration, and empties
// the window of rate's type: permits taken before count no more.
func (r *RateLimiter) SetRate(ctx context.Context, rate Rate) error {
	_, err := r.set(ctx, rate, false)
	return err
}

// UpdateRate gives a configured limiter the configuration rate and keeps
// the permits taken in its window: the permits available become the new
// rate less those taken within the new interval. It reports whether the
// limiter was configured (if not, nothing changes). A change between
// OVERALL and PerClient empties every window instead. Redisson's
// updateRate with keepState.
func (r *RateLimiter) UpdateRate(ctx context.Context, rate Rate) (bool, error) {
	if err := r.check(ctx); err != nil {
		return false, err
	}
	if err := rate.check(); err != nil {
		return false, err
	}
	updated, err := scripts.RateUpdate(ctx, r.c.runner.Conn(), r.name, r.c.id, rate.wire())
	return updated, changeError("rate limiter", r.name, err)
}

func (r *RateLimiter) set(ctx context.Context, rate Rate, only bool) (bool, error) {
	if err := r.check(ctx); err != nil {
		return false, err
	}
	if err := rate.check(); err != nil {
		return false, err
	}
	set, err := scripts.RateSet(ctx, r.c.runner.Conn(), r.name, r.c.id, rate.wire(), only)
	return set, changeError("rate limiter", r.name, err)
}

// Acquire takes n permits (1 <= n <= the rate), waiting as long as the
// window has fewer: it sleeps for as long as the limiter's reply says, then
// tries again. The wait options (NoWait, WaitAtMost, RetryCount) make it
// give up with ErrNotAcquired; if ctx ends first, it returns ctx's error
// wrapped. A limiter with no configuration is ErrRateNotSet; n above the
// rate, ErrInvalidArgument.
func (r *RateLimiter) Acquire(ctx context.Context, n int64, opts ...LockOption) error {
	return r.acquire(ctx, n, newAcquireConfig(-1, KindRate, opts))
}

// TryAcquire is Acquire with NoWait unless the options say otherwise. It
// returns false and a nil error when the permits were not there for as
// long as the limits allowed; any other failure is an error.
func (r *RateLimiter) TryAcquire(ctx context.Context, n int64, opts ...LockOption) (bool, error) {
	return tried(r.acquire(ctx, n, newAcquireConfig(0, KindRate, opts)))
}

func (r *RateLimiter) acquire(ctx context.Context, n int64, cfg acquireConfig) error {
	if err := r.check(ctx); err != nil {
		return err
	}
	if err := cfg.noLease("rate limiter"); err != nil {
		return err
	}
	if err := checkCount("permits", n, 1); err != nil {
		return err
	}
	var w waiting
	w.begin(r.c, ctx, KindRate, r.name, cfg)
	return w.end(w.run(&rateAcquire{r: r, ctx: ctx, n: n, cfg: cfg}, sendOnce, cfg))
}

// rateAcquire is one RateLimiter.Acquire call's side of the acquire loop.
// A window entry replicas did not confirm is kept: it only slows.
type rateAcquire struct {
	keepsNothing
	r   *RateLimiter
	ctx context.Context
	n   int64
	cfg acquireConfig
}

func (a *rateAcquire) try(int) outcome {
	acquired, wait, err := scripts.RateAcquire(a.ctx, a.r.c.runner.Conn(), a.r.name, a.r.c.id, a.n)
	return outcome{err: err, taken: acquired, bound: wait}
}

// sleepAfter is as long as the limiter said, at least the RetryDelay and 1ms.
func (a *rateAcquire) sleepAfter(o outcome) time.Duration {
	return max(o.bound, a.cfg.retryDelay, time.Millisecond)
}

// Available returns the permits the window has now.
func (r *RateLimiter) Available(ctx context.Context) (int64, error) {
	if err := r.check(ctx); err != nil {
		return 0, err
	}
	n, err := scripts.RateAvailable(ctx, r.c.runner.Conn(), r.name, r.c.id)
	return n, changeError("rate limiter", r.name, err)
}

// Release gives n permits (n >= 1) back to the window, up to the rate:
// for work that took permits and then did not happen. Redisson's release.
// Waiters are not told (nothing is published): they try again when the
// limiter told them to. A limiter with no configuration is ErrRateNotSet.
func (r *RateLimiter) Release(ctx context.Context, n int64) error {
	if err := r.check(ctx); err != nil {
		return err
	}
	if err := checkCount("permits", n, 1); err != nil {
		return err
	}
	return changeError("rate limiter", r.name, scripts.RateRelease(ctx, r.c.runner.Conn(), r.name, r.c.id, n))
}

// Config returns the limiter's configuration, whoever set it (a Java
// client's included). A limiter with no configuration is ErrRateNotSet.
// Redisson's getConfig.
func (r *RateLimiter) Config(ctx context.Context) (Rate, error) {
	if err := r.check(ctx); err != nil {
		return Rate{}, err
	}
	rate, err := scripts.RateConfig(ctx, r.c.runner.Conn(), r.name)
	if err != nil {
		return Rate{}, redisError("rate limiter", r.name, err)
	}
	return Rate(rate), nil
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
