package redissontest

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"
)

// Fair locks as Redisson 4.7's RFairLock keeps them
// (redisson/src/main/java/org/redisson/RedissonFairLock.java): the RLock
// hash, a LIST redisson_lock_queue:{N} of waiting "<uuid>:<tid>", a ZSET
// redisson_lock_timeout:{N} of their deadlines in ms on the Java client's
// clock (System.currentTimeMillis), and one channel per waiter,
// redisson_lock__channel:{N}:<uuid>:<tid>. Each script Redisson runs is
// replayed here as reads under WATCH and writes in MULTI/EXEC, step by step
// in the script's order; the comments name the Java method each step comes
// from.

// DefaultFairWait is Redisson's Config.fairLockWaitTimeout default (5
// minutes): the threadWaitTime of a waiter without a tryLock wait time.
const DefaultFairWait = 5 * time.Minute

func fairQueue(name string) string    { return prefixed("redisson_lock_queue", name) }
func fairTimeouts(name string) string { return prefixed("redisson_lock_timeout", name) }

// FairChannel is the channel thread tid waits on: RedissonFairLock.subscribe
// uses getChannelName() + ":" + getLockName(threadId).
func (c *Client) FairChannel(name string, tid int64) string {
	return channel(name) + ":" + c.Owner(tid)
}

// fairState is what a fair-lock script reads before it writes.
type fairState struct {
	now      int64 // RedissonFairLock.tryLockInnerAsync: currentTime = System.currentTimeMillis()
	queue    []string
	deadline map[string]float64
}

// readFair reads the queue and the deadlines (LRANGE, ZRANGE WITHSCORES).
func readFair(ctx context.Context, d rueidis.DedicatedClient, name string) (fairState, error) {
	st := fairState{now: time.Now().UnixMilli(), deadline: map[string]float64{}}
	q, err := d.Do(ctx, d.B().Lrange().Key(fairQueue(name)).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		return st, err
	}
	st.queue = q
	zs, err := d.Do(ctx, d.B().Zrange().Key(fairTimeouts(name)).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return st, err
	}
	for _, z := range zs {
		st.deadline[z.Member] = z.Score
	}
	return st, nil
}

// dropStale is the "remove stale threads" loop that opens every script of
// RedissonFairLock (tryLockInnerAsync, unlockInnerAsync, forceUnlockAsync):
// while the head has a deadline and it is <= now, ZREM it and LPOP it; no
// other deadline changes.
func (st *fairState) dropStale(d rueidis.DedicatedClient, name string) (cmds []rueidis.Completed) {
	for len(st.queue) > 0 {
		head := st.queue[0]
		dl, ok := st.deadline[head]
		if !ok || dl > float64(st.now) {
			break
		}
		cmds = append(cmds,
			d.B().Zrem().Key(fairTimeouts(name)).Member(head).Build(),
			d.B().Lpop().Key(fairQueue(name)).Build())
		delete(st.deadline, head)
		st.queue = st.queue[1:]
	}
	return cmds
}

// head returns the waiter at the head of the queue (LINDEX 0).
func (st *fairState) head() (string, bool) {
	if len(st.queue) == 0 {
		return "", false
	}
	return st.queue[0], true
}

func (c *Client) fairWait(wait time.Duration) int64 {
	// RedissonFairLock.tryLockInnerAsync / acquireFailedAsync: wait =
	// threadWaitTime, or the tryLock wait time when it is > 0.
	if wait > 0 {
		return wait.Milliseconds()
	}
	if c.FairWait > 0 {
		return c.FairWait.Milliseconds()
	}
	return DefaultFairWait.Milliseconds()
}

// FairTryAcquire runs RedissonFairLock.tryLockInnerAsync once for thread
// tid with wait time wait (0: none, as lock() passes -1). With join it is
// the EVAL_LONG script (lock, tryLock with a wait); without, the
// EVAL_NULL_BOOLEAN one (tryLock()). It returns acquired, or the ttl the
// script replies (for the EVAL_NULL_BOOLEAN script, 1).
func (c *Client) FairTryAcquire(ctx context.Context, name string, tid int64, wait time.Duration, join bool) (acquired bool, ttl int64, err error) {
	return c.fairTryAcquire(ctx, name, tid, wait, join, true)
}

// FairTryAcquireNonReentrant runs RedissonNonReentrantFairLock
// .tryLockInnerAsync once: FairTryAcquire's steps, but where RFairLock
// takes a re-entry, the script replies the error NON_REENTRANT_REACQUIRE
// (ErrReacquire) after dropping the stale waiters, and changes nothing
// else.
func (c *Client) FairTryAcquireNonReentrant(ctx context.Context, name string, tid int64, wait time.Duration, join bool) (acquired bool, ttl int64, err error) {
	return c.fairTryAcquire(ctx, name, tid, wait, join, false)
}

func (c *Client) fairTryAcquire(ctx context.Context, name string, tid int64, wait time.Duration, join, reentrant bool) (acquired bool, ttl int64, err error) {
	owner := c.Owner(tid)
	waitMs := c.fairWait(wait)
	err = c.atomicallyAll(ctx, []string{name, fairQueue(name), fairTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		acquired, ttl = false, 0
		st, err := readFair(ctx, d, name)
		if err != nil {
			return err
		}
		exists, err := d.Do(ctx, d.B().Exists().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		mine, err := d.Do(ctx, d.B().Hexists().Key(name).Field(owner).Build()).AsInt64()
		if err != nil {
			return err
		}
		pttl, err := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		cmds := st.dropStale(d, name)
		// "check if the lock can be acquired now": no lock, and no queue
		// or this thread at its head.
		if head, queued := st.head(); exists == 0 && (!queued || head == owner) {
			acquired = true
			// "remove this thread from the queue and timeout set"
			cmds = append(cmds,
				d.B().Lpop().Key(fairQueue(name)).Build(),
				d.B().Zrem().Key(fairTimeouts(name)).Member(owner).Build())
			delete(st.deadline, owner)
			// "decrease timeouts for all waiting in the queue": every
			// member left in the ZSET, by wait.
			for member := range st.deadline {
				cmds = append(cmds, d.B().Zincrby().Key(fairTimeouts(name)).Increment(float64(-waitMs)).Member(member).Build())
			}
			// "acquire the lock and set the TTL for the lease"
			cmds = append(cmds,
				d.B().Hset().Key(name).FieldValue().FieldValue(owner, "1").Build(),
				d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build())
			return exec(ctx, d, cmds...)
		}
		// "check if the lock is already held, and this is a re-entry";
		// the non-reentrant one: "same-thread reacquire is rejected", the
		// stale waiters' removal kept (an error reply undoes no write).
		if mine == 1 && !reentrant {
			if err := exec(ctx, d, cmds...); err != nil {
				return err
			}
			return ErrReacquire
		}
		if mine == 1 {
			acquired = true
			cmds = append(cmds,
				d.B().Hincrby().Key(name).Field(owner).Increment(1).Build(),
				d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build())
			return exec(ctx, d, cmds...)
		}
		if !join {
			// EVAL_NULL_BOOLEAN: "return 1" (not acquired); only the stale
			// threads were removed.
			ttl = 1
			return exec(ctx, d, cmds...)
		}
		// "check if the thread is already in the queue": return
		// math.max(0, pttl).
		if _, queued := st.deadline[owner]; queued {
			ttl = max(0, pttl)
			return exec(ctx, d, cmds...)
		}
		// "add the thread to the queue at the end": its deadline is the
		// last waiter's (less now), or the lock's PTTL, plus wait plus now.
		if n := len(st.queue); n > 0 && st.queue[n-1] != owner {
			if dl, ok := st.deadline[st.queue[n-1]]; ok {
				ttl = int64(dl) - st.now
			} else {
				ttl = pttl
			}
		} else {
			ttl = pttl
		}
		timeout := ttl + waitMs + st.now
		cmds = append(cmds,
			d.B().Zadd().Key(fairTimeouts(name)).ScoreMember().ScoreMember(float64(timeout), owner).Build(),
			d.B().Rpush().Key(fairQueue(name)).Element(owner).Build())
		return exec(ctx, d, cmds...)
	})
	return acquired, ttl, err
}

// FairAcquireFailed runs RedissonFairLock.acquireFailedAsync for thread tid
// with wait time wait: every waiter behind it has its deadline moved wait
// earlier (ZINCRBY), then it is removed (ZREM, LREM).
func (c *Client) FairAcquireFailed(ctx context.Context, name string, tid int64, wait time.Duration) error {
	owner := c.Owner(tid)
	waitMs := c.fairWait(wait)
	return c.atomicallyAll(ctx, []string{fairQueue(name), fairTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		queue, err := d.Do(ctx, d.B().Lrange().Key(fairQueue(name)).Start(0).Stop(-1).Build()).AsStrSlice()
		if err != nil {
			return err
		}
		var cmds []rueidis.Completed
		if i := slices.Index(queue, owner); i >= 0 {
			for _, behind := range queue[i+1:] {
				cmds = append(cmds, d.B().Zincrby().Key(fairTimeouts(name)).Increment(float64(-waitMs)).Member(behind).Build())
			}
		}
		cmds = append(cmds,
			d.B().Zrem().Key(fairTimeouts(name)).Member(owner).Build(),
			d.B().Lrem().Key(fairQueue(name)).Count(0).Element(owner).Build())
		return exec(ctx, d, cmds...)
	})
}

// unlockLatchTimeout stands for the latch TTL RedissonBaseLock.unlockInnerAsync
// computes, (timeout + retryDelay) * retryAttempts: about 20s with
// Redisson's defaults (3s, up to 2s, 4 attempts).
const unlockLatchTimeout = 20 * time.Second

// FairUnlock runs RedissonFairLock.unlockInnerAsync for thread tid with a
// new request id, then deletes the request's unlock latch as
// RedissonBaseLock.unlockInnerAsync does once the reply is in. It returns
// the script's reply: nil (not held) as held == false.
func (c *Client) FairUnlock(ctx context.Context, name string, tid int64) (held bool, err error) {
	owner := c.Owner(tid)
	latch := prefixed("redisson_unlock_latch", name) + ":" + uuid.NewString()
	err = c.atomicallyAll(ctx, []string{name, fairQueue(name), fairTimeouts(name), latch}, func(d rueidis.DedicatedClient) error {
		held = false
		// "local val = redis.call('get', KEYS[5])": a retry's first reply
		// (0 or 1, both a release).
		if err := d.Do(ctx, d.B().Get().Key(latch).Build()).Error(); err == nil {
			held = true
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		} else if !rueidis.IsRedisNil(err) {
			return err
		}
		st, err := readFair(ctx, d, name)
		if err != nil {
			return err
		}
		cmds := st.dropStale(d, name)
		count, err := d.Do(ctx, d.B().Hget().Key(name).Field(owner).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		exists, err := d.Do(ctx, d.B().Exists().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		setLatch := func(v string) rueidis.Completed {
			return d.B().Set().Key(latch).Value(v).PxMilliseconds(unlockLatchTimeout.Milliseconds()).Build()
		}
		wakeHead := func() []rueidis.Completed {
			if head, ok := st.head(); ok {
				return []rueidis.Completed{d.B().Publish().Channel(channel(name) + ":" + head).Message("0").Build()}
			}
			return nil
		}
		switch {
		case exists == 0:
			// The lock is gone: the next waiter is told, the latch set to 1,
			// and 1 returned.
			held = true
			cmds = append(append(cmds, wakeHead()...), setLatch("1"))
		case count == 0:
			return exec(ctx, d, cmds...) // "return nil"
		case count > 1:
			held = true
			cmds = append(cmds,
				d.B().Hincrby().Key(name).Field(owner).Increment(-1).Build(),
				d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build(),
				setLatch("0"))
		default:
			held = true
			cmds = append(append(cmds, d.B().Del().Key(name).Build(), setLatch("1")), wakeHead()...)
		}
		return exec(ctx, d, cmds...)
	})
	if err == nil {
		err = c.rdb.Do(ctx, c.rdb.B().Del().Key(latch).Build()).Error()
	}
	return held, err
}

// FairLock waits for the fair lock as RedissonLock.lock(leaseTime = -1)
// does: try (joining the queue), subscribe to this thread's channel, then
// try again on every message, waiting for one at most the ttl the script
// replied, or without limit when it is negative. It never leaves the queue
// early (lock() does not call acquireFailed); a ctx that ends returns its
// error, as an interrupted lockInterruptibly would throw.
func (c *Client) FairLock(ctx context.Context, name string, tid int64) error {
	if ok, _, err := c.FairTryAcquire(ctx, name, tid, 0, true); err != nil || ok {
		return err
	}
	sub, err := c.subscribe(ctx, c.FairChannel(name, tid))
	if err != nil {
		return err
	}
	defer sub.close()
	for {
		ok, ttl, err := c.FairTryAcquire(ctx, name, tid, 0, true)
		if err != nil || ok {
			return err
		}
		wait := time.Duration(math.MaxInt64)
		if ttl >= 0 {
			wait = time.Duration(ttl) * time.Millisecond
		}
		if err := sub.acquire(ctx, wait); err != nil {
			return err
		}
	}
}

// FairTryLock waits at most waitTime for the fair lock as
// RedissonLock.tryLock(waitTime, leaseTime = -1) does: the turn it takes in
// the queue is waitTime, each wait for a message is bounded by the ttl and
// by the time left, and when the time runs out it leaves the queue through
// acquireFailed.
func (c *Client) FairTryLock(ctx context.Context, name string, tid int64, waitTime time.Duration) (bool, error) {
	deadline := time.Now().Add(waitTime)
	giveUp := func() (bool, error) { return false, c.FairAcquireFailed(ctx, name, tid, waitTime) }
	if ok, _, err := c.FairTryAcquire(ctx, name, tid, waitTime, true); err != nil || ok {
		return ok, err
	}
	if time.Until(deadline) <= 0 {
		return giveUp()
	}
	sub, err := c.subscribe(ctx, c.FairChannel(name, tid))
	if err != nil {
		return false, err
	}
	defer sub.close()
	for {
		ok, ttl, err := c.FairTryAcquire(ctx, name, tid, waitTime, true)
		if err != nil || ok {
			return ok, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return giveUp()
		}
		wait := left
		if ttl >= 0 && time.Duration(ttl)*time.Millisecond < left {
			wait = time.Duration(ttl) * time.Millisecond
		}
		if err := sub.acquire(ctx, wait); err != nil {
			return false, err
		}
		if time.Until(deadline) <= 0 {
			return giveUp()
		}
	}
}
