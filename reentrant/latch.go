package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// CountDownLatch is a handle on a count-down latch, Redisson's
// RCountDownLatch: a string key holding the count. Await blocks until the
// count reaches 0; CountDown lowers it, and the call that reaches 0 deletes
// the key and publishes "0" on redisson_countdownlatch__channel__{name},
// which opens the latch for every waiter, Java Redisson's included. A
// missing key is a count of 0: an open latch. Get one from
// Client.CountDownLatch; its methods are safe for concurrent use.
type CountDownLatch struct {
	c     *Client
	name  string // the key: given, mapped by Options.NameMapper
	given string
}

// CountDownLatch returns a handle on the latch stored at key name. It is
// cheap and does nothing on Redis. On a cluster the name may not contain
// "{": Redisson's latch channel braces the whole name.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{c: c, name: c.key(name), given: name}
}

// Name returns the latch's name as given ("" for a nil CountDownLatch):
// its key, unless Options.NameMapper maps it.
func (l *CountDownLatch) Name() string {
	if l == nil {
		return ""
	}
	return l.given
}

func (l *CountDownLatch) check(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("relock: %w: nil latch", ErrInvalidArgument)
	}
	return checkHandle(l.c, ctx, "latch", l.name, false)
}

// TrySetCount sets the count to n (n >= 1) if the latch has none (it is
// open), and reports whether it did. Awaiting callers that find the new
// count wait again.
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int64) (bool, error) {
	if err := l.check(ctx); err != nil {
		return false, err
	}
	if err := checkCount("count", n, 1); err != nil {
		return false, err
	}
	set, err := scripts.LatchTrySet(ctx, l.c.runner.Conn(), l.name, n, l.c.publish)
	return set, changeError("latch", l.name, err)
}

// CountDown lowers the count by one; at 0 the latch opens. On an open latch
// it changes nothing. While the server cannot run it (loading, failing
// over, unreachable) it is tried again, for up to 10s; but once sent it is
// not sent again: when its reply is lost, the error says so, and the count
// may have been lowered. It is cleanup: ctx's cancellation does not stop
// it.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	return changeError("latch", l.name, l.c.untilRun(ctx, l.name, func(ctx context.Context) error {
		_, err := scripts.LatchCountDown(ctx, l.c.runner.Conn(), l.name, l.c.publish)
		return err
	}))
}

// Count returns the count: 0 when the latch is open.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	return getCount(ctx, l.c, "latch", l.name)
}

// Delete deletes the latch, which opens it, and reports whether it had a
// count.
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	if err := l.check(ctx); err != nil {
		return false, err
	}
	deleted, err := scripts.LatchDelete(ctx, l.c.runner.Conn(), l.name, l.c.publish)
	return deleted, changeError("latch", l.name, err)
}

// Await blocks until the count is 0, ctx ends, or the Client is closed. It
// is woken by the count-down that opens the latch, and reads the count
// again at least every RepollInterval. NoWait and WaitAtMost make it give
// up with ErrNotAcquired. A wait that ends while Redis gives no answer
// returns an error wrapping the last connection error.
func (l *CountDownLatch) Await(ctx context.Context, opts ...LockOption) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	cfg := newAcquireConfig(-1, KindLatch, opts)
	if err := cfg.noLease("latch"); err != nil {
		return err
	}
	var w waiting
	w.begin(l.c, ctx, KindLatch, l.name, cfg)
	w.announcedOn(scripts.LatchChannel(l.name), latchWakes, "")
	return w.end(w.run(&latchAwait{l: l, ctx: ctx, cfg: cfg}, readOnly, cfg))
}

// latchAwait is one CountDownLatch.Await call's side of the acquire loop:
// its attempts read the count, and succeed when it is 0.
type latchAwait struct {
	keepsNothing
	l   *CountDownLatch
	ctx context.Context
	cfg acquireConfig
}

func (a *latchAwait) try(int) outcome {
	n, err := scripts.Count(a.ctx, a.l.c.runner.Conn(), a.l.name)
	return outcome{err: err, taken: err == nil && n <= 0, bound: -1}
}

func (a *latchAwait) sleepAfter(outcome) time.Duration { return a.cfg.sleep(a.l.c.opts.RepollInterval) }

// latchWakes reads a latch's channel: "0" (the count reached 0) wakes every
// waiter; "1" (a new count) wakes none (CountDownLatchPubSub.onMessage).
func latchWakes(message string) int {
	if message == "0" {
		return pubsub.All
	}
	return 0
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
