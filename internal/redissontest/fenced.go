package redissontest

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// tokenCounter is RedissonFencedLock's tokenName:
// prefixName("redisson_lock_token", name).
func tokenCounter(name string) string { return prefixed("redisson_lock_token", name) }

// FencedTryAcquire is one attempt of RedissonFencedLock.tryLockInnerAsync
// (long, TimeUnit, long), the one lockAndGetToken and tryLockAndGetToken
// call, for thread tid: when the lock is free or tid's, INCR the token
// counter (a plain INCR: Redisson gives it no TTL, and starts it again at
// 1 if it is gone), HINCRBY the hold, PEXPIRE the lease, and reply
// {-1, token}; otherwise {pttl, -1}. It returns the token, or 0 and the
// lock's PTTL.
func (c *Client) FencedTryAcquire(ctx context.Context, name string, tid int64) (token int64, pttl time.Duration, err error) {
	for {
		err = c.rdb.Dedicated(func(d rueidis.DedicatedClient) error {
			token, pttl = 0, 0
			if err := d.Do(ctx, d.B().Watch().Key(name, tokenCounter(name)).Build()).Error(); err != nil {
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
			if exists == 1 && mine == 0 {
				ms, err := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
				d.Do(ctx, d.B().Unwatch().Build())
				pttl = time.Duration(ms) * time.Millisecond
				return err
			}
			res := d.DoMulti(ctx,
				d.B().Multi().Build(),
				d.B().Incr().Key(tokenCounter(name)).Build(),
				d.B().Hincrby().Key(name).Field(c.Owner(tid)).Increment(1).Build(),
				d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build(),
				d.B().Exec().Build())
			if rueidis.IsRedisNil(res[4].Error()) {
				return errConflict
			}
			replies, err := res[4].ToArray()
			if err != nil {
				return err
			}
			token, err = replies[0].AsInt64()
			return err
		})
		if !errors.Is(err, errConflict) {
			return token, pttl, err
		}
	}
}
