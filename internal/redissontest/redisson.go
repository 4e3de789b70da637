// Package redissontest is a stand-in for a Java Redisson client in tests: it
// takes and releases RLocks the way Redisson does on the wire (hash field
// "<uuid>:<thread-id>" -> count, PEXPIRE, "0" published on
// redisson_lock__channel:{N}, SUBSCRIBE to wait), with raw commands made
// atomic by WATCH/MULTI/EXEC. It shares no code with relock's scripts, so a
// test that passes against it checks the protocol, not an echo of itself.
package redissontest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// Client is one Redisson-like process.
type Client struct {
	rdb   rueidis.Client
	id    string
	Lease time.Duration // default 30s
	// FairWait is Config.fairLockWaitTimeout; 0 means DefaultFairWait.
	FairWait time.Duration
}

// New returns a client with a fresh UUID.
func New(rdb rueidis.Client) *Client {
	return &Client{rdb: rdb, id: uuid.NewString(), Lease: 30 * time.Second}
}

// Owner returns the hash field of thread tid.
func (c *Client) Owner(tid int64) string { return c.id + ":" + strconv.FormatInt(tid, 10) }

// prefixed is Redisson's prefixName: prefix + ":" + name when name has a
// "{", else prefix + ":{" + name + "}".
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

func channel(name string) string { return prefixed("redisson_lock__channel", name) }

var errConflict = errors.New("redissontest: watched key changed")

// TryAcquire makes one attempt for thread tid. It returns 0 when held, else
// the lock's PTTL.
func (c *Client) TryAcquire(ctx context.Context, name string, tid int64) (time.Duration, error) {
	return c.tryAcquire(ctx, name, tid, true)
}

// ErrReacquire is RedissonNonReentrantLock's refusal of a thread that holds
// the lock already (the script's error NON_REENTRANT_REACQUIRE, thrown to
// the caller as IllegalMonitorStateException).
var ErrReacquire = errors.New("redissontest: NON_REENTRANT_REACQUIRE")

// TryAcquireNonReentrant is one attempt of RedissonNonReentrantLock
// (RedissonNonReentrantLock.tryLockInnerAsync): a free lock is taken as
// RLock takes it; a lock thread tid holds already is refused with
// ErrReacquire and left as it is; otherwise the lock's PTTL.
func (c *Client) TryAcquireNonReentrant(ctx context.Context, name string, tid int64) (time.Duration, error) {
	return c.tryAcquire(ctx, name, tid, false)
}

// tryAcquire is RedissonLock.tryLockInnerAsync, or with reentrant false
// RedissonNonReentrantLock's.
func (c *Client) tryAcquire(ctx context.Context, name string, tid int64, reentrant bool) (time.Duration, error) {
	for {
		var pttl time.Duration
		err := c.rdb.Dedicated(func(d rueidis.DedicatedClient) error {
			if err := d.Do(ctx, d.B().Watch().Key(name).Build()).Error(); err != nil {
				return err
			}
			exists, err := d.Do(ctx, d.B().Exists().Key(name).Build()).AsInt64()
			if err != nil {
				return err
			}
			mine, err := d.Do(ctx, d.B().Hexists().Key(name).Field(c.Owner(tid)).Build()).AsInt64()
			if err != nil {
				return err
			}
			if exists == 1 && mine == 1 && !reentrant {
				d.Do(ctx, d.B().Unwatch().Build())
				return ErrReacquire
			}
			if exists == 1 && mine == 0 {
				ms, err := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
				d.Do(ctx, d.B().Unwatch().Build())
				pttl = time.Duration(ms) * time.Millisecond
				return err
			}
			res := d.DoMulti(ctx,
				d.B().Multi().Build(),
				d.B().Hincrby().Key(name).Field(c.Owner(tid)).Increment(1).Build(),
				d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build(),
				d.B().Exec().Build())
			if rueidis.IsRedisNil(res[3].Error()) {
				return errConflict
			}
			return res[3].Error()
		})
		if errors.Is(err, errConflict) {
			continue
		}
		return pttl, err
	}
}

// Lock waits as Redisson does: subscribe to the lock channel, try, and wait
// for a message or the PTTL, then try again.
func (c *Client) Lock(ctx context.Context, name string, tid int64) error {
	return c.wait(ctx, channel(name), func() (time.Duration, error) { return c.TryAcquire(ctx, name, tid) })
}

// wait runs try until it returns 0, waking on a lock channel's messages
// on ch (see lockReleases).
func (c *Client) wait(ctx context.Context, ch string, try func() (time.Duration, error)) error {
	pttl, err := try()
	if err != nil || pttl == 0 {
		return err
	}
	sub, err := c.subscribeWith(ctx, ch, lockReleases)
	if err != nil {
		return err
	}
	defer sub.close()
	for {
		pttl, err = try()
		if err != nil || pttl == 0 {
			return err
		}
		if pttl < 0 || pttl > time.Second {
			pttl = time.Second
		}
		if err := sub.acquire(ctx, pttl); err != nil {
			return err
		}
	}
}

// lockReleases is LockPubSub.onMessage (pubsub/LockPubSub.java): the
// payload is decoded by LongCodec (client/codec/LongCodec.java,
// Long.valueOf), and UNLOCK_MESSAGE (0) or READ_UNLOCK_MESSAGE (1) release
// the entry's latch; any other number does nothing. (A payload that is not
// a number fails in Redisson's decoder, and wakes nobody.) Go's ParseInt
// takes what Long.valueOf takes: a sign, leading zeros.
func lockReleases(message string) bool {
	n, err := strconv.ParseInt(message, 10, 64)
	return err == nil && (n == 0 || n == 1)
}

// subscription is a RedissonLockEntry: a subscribed channel whose messages
// release permits of a latch (here at most one is kept).
type subscription struct {
	wake  chan struct{}
	close func()
}

// subscribe subscribes to ch on a dedicated connection and returns once
// the subscription is confirmed. Every message releases the latch.
func (c *Client) subscribe(ctx context.Context, ch string) (*subscription, error) {
	return c.subscribeWith(ctx, ch, func(string) bool { return true })
}

// subscribeWith is subscribe with the entry's onMessage: releases says
// whether a message releases the latch (for this one waiter).
func (c *Client) subscribeWith(ctx context.Context, ch string, releases func(message string) bool) (*subscription, error) {
	s := &subscription{wake: make(chan struct{}, 1)}
	subscribed := make(chan struct{}, 1)
	d, release := c.rdb.Dedicate()
	s.close = release
	closed := d.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			if !releases(m.Message) {
				return
			}
			select {
			case s.wake <- struct{}{}:
			default:
			}
		},
		OnSubscription: func(sub rueidis.PubSubSubscription) {
			if sub.Kind == "subscribe" {
				subscribed <- struct{}{}
			}
		},
	})
	if err := d.Do(ctx, d.B().Subscribe().Channel(ch).Build()).Error(); err != nil {
		release()
		return nil, err
	}
	select {
	case <-subscribed:
		return s, nil
	case err := <-closed:
		release()
		return nil, err
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// acquire is the latch's tryAcquire(d): it returns on a message or after d.
func (s *subscription) acquire(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ForceUnlock is RedissonLock.forceUnlockAsync: the lock's key is deleted
// whoever holds it, and only if there was one, UNLOCK_MESSAGE (0) is
// published on its channel. It reports whether a key was deleted.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	for {
		var deleted bool
		err := c.rdb.Dedicated(func(d rueidis.DedicatedClient) error {
			if err := d.Do(ctx, d.B().Watch().Key(name).Build()).Error(); err != nil {
				return err
			}
			n, err := d.Do(ctx, d.B().Exists().Key(name).Build()).AsInt64()
			if err != nil || n == 0 {
				d.Do(ctx, d.B().Unwatch().Build())
				return err
			}
			deleted = true
			res := d.DoMulti(ctx, d.B().Multi().Build(), d.B().Del().Key(name).Build(),
				d.B().Publish().Channel(channel(name)).Message("0").Build(), d.B().Exec().Build())
			if rueidis.IsRedisNil(res[len(res)-1].Error()) {
				return errConflict
			}
			return res[len(res)-1].Error()
		})
		if errors.Is(err, errConflict) {
			continue
		}
		return deleted, err
	}
}

// Unlock releases one hold of thread tid as Redisson does. It reports
// whether the thread held the lock.
func (c *Client) Unlock(ctx context.Context, name string, tid int64) (bool, error) {
	for {
		var held bool
		err := c.rdb.Dedicated(func(d rueidis.DedicatedClient) error {
			if err := d.Do(ctx, d.B().Watch().Key(name).Build()).Error(); err != nil {
				return err
			}
			n, err := d.Do(ctx, d.B().Hget().Key(name).Field(c.Owner(tid)).Build()).AsInt64()
			if rueidis.IsRedisNil(err) {
				d.Do(ctx, d.B().Unwatch().Build())
				return nil
			}
			if err != nil {
				return err
			}
			held = true
			cmds := rueidis.Commands{d.B().Multi().Build()}
			if n > 1 {
				cmds = append(cmds,
					d.B().Hincrby().Key(name).Field(c.Owner(tid)).Increment(-1).Build(),
					d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build())
			} else {
				cmds = append(cmds,
					d.B().Del().Key(name).Build(),
					d.B().Publish().Channel(channel(name)).Message("0").Build())
			}
			res := d.DoMulti(ctx, append(cmds, d.B().Exec().Build())...)
			if rueidis.IsRedisNil(res[len(res)-1].Error()) {
				return errConflict
			}
			return res[len(res)-1].Error()
		})
		if errors.Is(err, errConflict) {
			continue
		}
		return held, err
	}
}
