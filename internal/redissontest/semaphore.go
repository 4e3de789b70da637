package redissontest

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Semaphores as Redisson 4.7 keeps them. RSemaphore
// (redisson/src/main/java/org/redisson/RedissonSemaphore.java): a string
// key N holding the available permits, and the channel redisson_sc:{N}.
// RPermitExpirableSemaphore (RedissonPermitExpirableSemaphore.java): N,
// the ZSET {N}:timeout of taken permit ids (16 raw bytes) -> lease end in
// ms on the Java client's clock, or 922337203685477 without a lease, and
// the same channel. Each script is replayed as reads under WATCH and
// writes in MULTI/EXEC, in the script's order; the comments name the Java
// method each step comes from.

// SemaphoreChannel is RedissonSemaphore.getChannelName:
// prefixName("redisson_sc", name).
func SemaphoreChannel(name string) string { return prefixed("redisson_sc", name) }

// suffixed is RedissonObject.suffixName: name + ":" + suffix when name has
// a "{", else "{" + name + "}:" + suffix.
func suffixed(name, suffix string) string {
	if containsBrace(name) {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

func containsBrace(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '{' {
			return true
		}
	}
	return false
}

// getInt reads an integer key: ok false when it is missing.
func getInt(ctx context.Context, d rueidis.DedicatedClient, key string) (n int64, ok bool, err error) {
	n, err = d.Do(ctx, d.B().Get().Key(key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, false, nil
	}
	return n, err == nil, err
}

// SemaphoreTryAcquire is RedissonSemaphore.tryAcquireAsync0: GET N; if it
// holds at least permits, DECRBY.
func (c *Client) SemaphoreTryAcquire(ctx context.Context, name string, permits int64) (bool, error) {
	var ok bool
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		value, exists, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		if !exists || value < permits {
			ok = false
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		ok = true
		return exec(ctx, d, d.B().Decrby().Key(name).Decrement(permits).Build())
	})
	return ok, err
}

// SemaphoreRelease is RedissonSemaphore.releaseAsync: INCRBY N, then
// publish the new value.
func (c *Client) SemaphoreRelease(ctx context.Context, name string, permits int64) error {
	return c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		value, _, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		return exec(ctx, d,
			d.B().Incrby().Key(name).Increment(permits).Build(),
			d.B().Publish().Channel(SemaphoreChannel(name)).Message(strconv.FormatInt(value+permits, 10)).Build())
	})
}

// SemaphoreReleaseIfExists is RedissonSemaphore.releaseIfExistsAsync:
// when N exists, INCRBY N and publish the new value; reports whether it
// did.
func (c *Client) SemaphoreReleaseIfExists(ctx context.Context, name string, permits int64) (bool, error) {
	var released bool
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		value, exists, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		if released = exists; !released {
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		return exec(ctx, d,
			d.B().Incrby().Key(name).Increment(permits).Build(),
			d.B().Publish().Channel(SemaphoreChannel(name)).Message(strconv.FormatInt(value+permits, 10)).Build())
	})
	return released, err
}

// SemaphoreTrySetPermits is RedissonSemaphore.trySetPermitsAsync(int):
// when N is missing, SET it and publish the permits. With ttl > 0 it is
// trySetPermitsAsync(int, Duration): the SET carries PX ttl.
func (c *Client) SemaphoreTrySetPermits(ctx context.Context, name string, permits int64, ttl time.Duration) (bool, error) {
	var set bool
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		_, exists, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		if set = !exists; !set {
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		p := strconv.FormatInt(permits, 10)
		setCmd := d.B().Set().Key(name).Value(p).Build()
		if ttl > 0 {
			setCmd = d.B().Set().Key(name).Value(p).PxMilliseconds(ttl.Milliseconds()).Build()
		}
		return exec(ctx, d,
			setCmd,
			d.B().Publish().Channel(SemaphoreChannel(name)).Message(p).Build())
	})
	return set, err
}

// SemaphoreAcquire is RedissonSemaphore.acquire(int): try; subscribe; then
// try, and wait on the entry's latch with no timeout (getLatch().acquire()),
// until a try succeeds. SemaphorePubSub.onMessage releases
// min(waiters, message) permits of the latch: with this one waiter, any
// message above 0. Only ctx bounds the wait: a Java waiter never re-polls.
func (c *Client) SemaphoreAcquire(ctx context.Context, name string, permits int64) error {
	return c.waitForMessage(ctx, SemaphoreChannel(name), semaphoreReleases, func() (bool, error) {
		return c.SemaphoreTryAcquire(ctx, name, permits)
	})
}

// semaphoreReleases is SemaphorePubSub.onMessage for one waiter: the latch
// is released min(1, message) times; Long's decoder fails on anything not
// a decimal integer.
func semaphoreReleases(message string) bool {
	n, err := strconv.ParseInt(message, 10, 64)
	return err == nil && n > 0
}

// waitForMessage is the loop RedissonSemaphore.acquire and
// RedissonCountDownLatch.await share: try; subscribe; try, and if that
// fails, block on the latch until a message releases it; again.
func (c *Client) waitForMessage(ctx context.Context, ch string, releases func(string) bool, try func() (bool, error)) error {
	if ok, err := try(); err != nil || ok {
		return err
	}
	sub, err := c.subscribeWith(ctx, ch, releases)
	if err != nil {
		return err
	}
	defer sub.close()
	for {
		if ok, err := try(); err != nil || ok {
			return err
		}
		select {
		case <-sub.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nonExpirable is RedissonPermitExpirableSemaphore.nonExpirableTimeout.
const nonExpirable = 922337203685477

func permitTimeouts(name string) string { return suffixed(name, "timeout") }

// NewPermitID is ServiceManager.generateId: 16 random bytes, shown as hex.
func NewPermitID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.N(256))
	}
	return hex.EncodeToString(b[:])
}

// reclaim is the "expiredIds" step that opens RedissonPermitExpirableSemaphore's
// scripts: ZRANGEBYSCORE {N}:timeout 0 now LIMIT 0 limit; if any, ZREM them,
// INCRBY N by their count, and publish the new value when above 0. It
// returns the writes and N's value after them.
func reclaim(ctx context.Context, d rueidis.DedicatedClient, name string, now, limit int64) (cmds []rueidis.Completed, value int64, exists bool, err error) {
	value, exists, err = getInt(ctx, d, name)
	if err != nil {
		return nil, 0, false, err
	}
	expired, err := d.Do(ctx, d.B().Zrangebyscore().Key(permitTimeouts(name)).Min("0").Max(strconv.FormatInt(now, 10)).Limit(0, limit).Build()).AsStrSlice()
	if err != nil || len(expired) == 0 {
		return nil, value, exists, err
	}
	value, exists = value+int64(len(expired)), true
	cmds = append(cmds,
		d.B().Zrem().Key(permitTimeouts(name)).Member(expired...).Build(),
		d.B().Incrby().Key(name).Increment(int64(len(expired))).Build())
	if value > 0 {
		cmds = append(cmds, d.B().Publish().Channel(SemaphoreChannel(name)).Message(strconv.FormatInt(value, 10)).Build())
	}
	return cmds, value, exists, nil
}

// PermitTryAcquire is RedissonPermitExpirableSemaphore.tryAcquireAsync(List,
// long) for one permit: lease 0 is no lease (nonExpirableTimeout), else
// the lease ends lease from now on this client's clock (calcTimeout). It
// returns the new id, or "" and the nearest lease end (ms, this clock; 0
// when none) as its ':<ms>' reply gives.
func (c *Client) PermitTryAcquire(ctx context.Context, name string, lease time.Duration) (id string, nearest int64, err error) {
	now := time.Now().UnixMilli()
	timeoutDate := int64(nonExpirable)
	if lease > 0 {
		timeoutDate = now + lease.Milliseconds()
	}
	candidate := NewPermitID()
	raw, _ := hex.DecodeString(candidate)
	err = c.atomicallyAll(ctx, []string{name, permitTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		id, nearest = "", 0
		cmds, value, exists, err := reclaim(ctx, d, name, now, 1)
		if err != nil {
			return err
		}
		if exists && value >= 1 {
			cmds = append(cmds,
				d.B().Decrby().Key(name).Decrement(1).Build(),
				d.B().Zadd().Key(permitTimeouts(name)).ScoreMember().ScoreMember(float64(timeoutDate), string(raw)).Build())
			ttl, err := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
			if err != nil {
				return err
			}
			if ttl > 0 {
				cmds = append(cmds, d.B().Pexpire().Key(permitTimeouts(name)).Milliseconds(ttl).Build())
			}
			id = candidate
			return exec(ctx, d, cmds...)
		}
		first, err := d.Do(ctx, d.B().Zrange().Key(permitTimeouts(name)).Min("0").Max("0").Withscores().Build()).AsZScores()
		if err != nil {
			return err
		}
		if len(first) > 0 && int64(first[0].Score) != nonExpirable {
			nearest = int64(first[0].Score)
		}
		return exec(ctx, d, cmds...)
	})
	return id, nearest, err
}

// PermitAcquire is RedissonPermitExpirableSemaphore.acquire(long,
// TimeUnit): try; subscribe; then try, and wait on the latch until a
// message, or until the nearest lease ends when the reply gave one.
func (c *Client) PermitAcquire(ctx context.Context, name string, lease time.Duration) (string, error) {
	id, _, err := c.PermitTryAcquire(ctx, name, lease)
	if err != nil || id != "" {
		return id, err
	}
	sub, err := c.subscribeWith(ctx, SemaphoreChannel(name), semaphoreReleases)
	if err != nil {
		return "", err
	}
	defer sub.close()
	for {
		id, nearest, err := c.PermitTryAcquire(ctx, name, lease)
		if err != nil || id != "" {
			return id, err
		}
		wait := time.Duration(1<<62 - 1)
		if nearest > 0 {
			wait = time.Duration(nearest-time.Now().UnixMilli()) * time.Millisecond
		}
		if err := sub.acquire(ctx, max(wait, 0)); err != nil {
			return "", err
		}
	}
}

// PermitRelease is RedissonPermitExpirableSemaphore.tryReleaseAsync(String):
// ZSCORE and ZREM the id; if it was there, INCRBY N 1 and publish the new
// value; true unless it was missing or its lease had ended.
func (c *Client) PermitRelease(ctx context.Context, name, id string) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, err
	}
	now := time.Now().UnixMilli()
	var released bool
	err = c.atomicallyAll(ctx, []string{name, permitTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		expire, err := d.Do(ctx, d.B().Zscore().Key(permitTimeouts(name)).Member(string(raw)).Build()).AsFloat64()
		if rueidis.IsRedisNil(err) {
			released = false
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		if err != nil {
			return err
		}
		value, _, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		released = int64(expire) > now
		return exec(ctx, d,
			d.B().Zrem().Key(permitTimeouts(name)).Member(string(raw)).Build(),
			d.B().Incrby().Key(name).Increment(1).Build(),
			d.B().Publish().Channel(SemaphoreChannel(name)).Message(strconv.FormatInt(value+1, 10)).Build())
	})
	return released, err
}

// PermitAvailable is RedissonPermitExpirableSemaphore.availablePermitsAsync:
// reclaim every expired permit, then GET N (0 when missing).
func (c *Client) PermitAvailable(ctx context.Context, name string) (int64, error) {
	now := time.Now().UnixMilli()
	var n int64
	err := c.atomicallyAll(ctx, []string{name, permitTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		cmds, value, _, err := reclaim(ctx, d, name, now, -1)
		if err != nil {
			return err
		}
		n = value
		return exec(ctx, d, cmds...)
	})
	return n, err
}

// PermitDelete is RedissonPermitExpirableSemaphore.deleteAsync: DEL of the
// raw name and the timeout name, true when it deleted any
// (RedissonObject.deleteAsync(keys...): DEL_OBJECTS, BooleanAmountReplayConvertor).
func (c *Client) PermitDelete(ctx context.Context, name string) (bool, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Del().Key(name, permitTimeouts(name)).Build()).AsInt64()
	return n > 0, err
}

// PermitLeaseTime is RedissonPermitExpirableSemaphore.getLeaseTimeAsync:
// reclaim every expired permit, then ZSCORE the id: -1 when it has no
// lease (nonExpirableTimeout), else its lease end minus now (ms, this
// client's clock); a missing id is the script's 0, which the Java side
// throws on (IllegalArgumentException): an error here.
func (c *Client) PermitLeaseTime(ctx context.Context, name, id string) (int64, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return 0, err
	}
	now := time.Now().UnixMilli()
	var left int64
	err = c.atomicallyAll(ctx, []string{name, permitTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		cmds, _, _, err := reclaim(ctx, d, name, now, -1)
		if err != nil {
			return err
		}
		score, err := d.Do(ctx, d.B().Zscore().Key(permitTimeouts(name)).Member(string(raw)).Build()).AsFloat64()
		switch {
		case rueidis.IsRedisNil(err):
			left = 0
		case err != nil:
			return err
		case int64(score) == nonExpirable:
			left = -1
		default:
			left = int64(score) - now
		}
		return exec(ctx, d, cmds...)
	})
	if err == nil && left == 0 {
		err = errors.New("Permit with id " + id + " has already been released or doesn't exist")
	}
	return left, err
}

// PermitUpdateLease is RedissonPermitExpirableSemaphore.updateLeaseTimeAsync:
// reclaim every expired permit, then, when the id is taken, ZADD it with
// the new lease end (calcTimeout: now + lease on this client's clock, or
// nonExpirableTimeout for a leaseTime of -1, which a negative lease
// stands for here); true when it was taken.
func (c *Client) PermitUpdateLease(ctx context.Context, name, id string, lease time.Duration) (bool, error) {
	raw, err := hex.DecodeString(id)
	if err != nil {
		return false, err
	}
	now := time.Now().UnixMilli()
	timeoutDate := int64(nonExpirable)
	if lease >= 0 {
		timeoutDate = now + lease.Milliseconds()
	}
	var updated bool
	err = c.atomicallyAll(ctx, []string{name, permitTimeouts(name)}, func(d rueidis.DedicatedClient) error {
		cmds, _, _, err := reclaim(ctx, d, name, now, -1)
		if err != nil {
			return err
		}
		_, err = d.Do(ctx, d.B().Zscore().Key(permitTimeouts(name)).Member(string(raw)).Build()).AsFloat64()
		switch {
		case rueidis.IsRedisNil(err):
			updated = false
		case err != nil:
			return err
		default:
			updated = true
			cmds = append(cmds, d.B().Zadd().Key(permitTimeouts(name)).ScoreMember().ScoreMember(float64(timeoutDate), string(raw)).Build())
		}
		return exec(ctx, d, cmds...)
	})
	return updated, err
}
