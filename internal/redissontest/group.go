package redissontest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/minio/highwayhash"
	"github.com/redis/rueidis"
)

// The group lock, RedissonFasterMultiLock.java (getMultiLock(group,
// values)): one hash per group; for each value's field f held by thread
// lockName, f -> lockName, f:lockName:expire_time -> the hold's end on the
// client's clock (ms), and f:lockName:lock_count.

// groupField is RedissonFasterMultiLock.hashValue for a value the codec
// encodes as its own bytes (StringCodec): Hash.hash128toBase64
// (misc/Hash.java): HighwayHash (misc/HighwayHash.java) under Hash.KEY,
// finalize128's two longs written big-endian (Unpooled.copyLong), netty's
// Base64.encode, the last two characters ("==") cut off.
func groupField(value string) string {
	var key [32]byte
	for i, k := range []uint64{0x9e3779b97f4a7c15, 0xf39cc0605cedc834, 0x1082276bf3a27251, 0xf86c6a11d0c18e95} {
		binary.LittleEndian.PutUint64(key[8*i:], k) // HighwayHash reads its key as little-endian longs
	}
	sum := highwayhash.Sum128([]byte(value), key[:]) // finalize128's longs, little-endian
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], binary.LittleEndian.Uint64(sum[:8]))
	binary.BigEndian.PutUint64(buf[8:], binary.LittleEndian.Uint64(sum[8:]))
	s := base64.StdEncoding.EncodeToString(buf[:])
	return s[:len(s)-2]
}

// groupFields is RedissonFasterMultiLock.hashValues: each value's field,
// collected into a set.
func groupFields(values []string) []string {
	seen := map[string]bool{}
	var fields []string
	for _, v := range values {
		if f := groupField(v); !seen[f] {
			seen[f] = true
			fields = append(fields, f)
		}
	}
	return fields
}

func nowMillis() int64 { return time.Now().UnixMilli() } // System.currentTimeMillis

// GroupTryAcquire is one attempt of thread tid on values of group
// (RedissonFasterMultiLock.tryLockInnerAsync), with the client's lease
// (internalLockLeaseTime). It returns 0 when every value is now held,
// else how long until the last other holder's hold among them ends, and
// nothing is changed.
func (c *Client) GroupTryAcquire(ctx context.Context, group string, tid int64, values []string) (time.Duration, error) {
	fields, lockName := groupFields(values), c.Owner(tid)
	lease := c.Lease.Milliseconds()
	var wait int64
	err := c.atomically(ctx, group, func(d rueidis.DedicatedClient) error {
		wait = 0
		now := nowMillis()
		exists, err := d.Do(ctx, d.B().Exists().Key(group).Build()).AsInt64()
		if err != nil {
			return err
		}
		maxExpire := int64(-1)
		if exists > 0 {
			for _, f := range fields {
				holder, err := d.Do(ctx, d.B().Hget().Key(group).Field(f).Build()).ToString()
				if rueidis.IsRedisNil(err) || (err == nil && holder == lockName) {
					continue
				}
				if err != nil {
					return err
				}
				end, err := d.Do(ctx, d.B().Hget().Key(group).Field(f+":"+holder+":expire_time").Build()).AsInt64()
				if err == nil && end > now && end > maxExpire {
					maxExpire = end
				}
			}
		}
		if maxExpire != -1 {
			wait = maxExpire - now
			d.Do(ctx, d.B().Unwatch().Build())
			return nil
		}
		var cmds []rueidis.Completed
		for _, f := range fields {
			cmds = append(cmds, d.B().Hset().Key(group).FieldValue().FieldValue(f, lockName).Build())
			ef := f + ":" + lockName + ":expire_time"
			end, err := d.Do(ctx, d.B().Hget().Key(group).Field(ef).Build()).AsInt64()
			if newEnd := lease + now; rueidis.IsRedisNil(err) || (err == nil && end < newEnd) {
				cmds = append(cmds, d.B().Hset().Key(group).FieldValue().FieldValue(ef, strconv.FormatInt(newEnd, 10)).Build())
			}
			cmds = append(cmds, d.B().Hincrby().Key(group).Field(f+":"+lockName+":lock_count").Increment(1).Build())
		}
		if exists == 1 {
			pttl, err := d.Do(ctx, d.B().Pttl().Key(group).Build()).AsInt64()
			if err != nil {
				return err
			}
			if pttl > 0 && lease > pttl {
				cmds = append(cmds, d.B().Pexpire().Key(group).Milliseconds(lease).Build())
			}
		} else {
			cmds = append(cmds, d.B().Pexpire().Key(group).Milliseconds(lease).Build())
		}
		return exec(ctx, d, cmds...)
	})
	return time.Duration(wait) * time.Millisecond, err
}

// GroupLock waits for values of group as RedissonFasterMultiLock.lock
// does: try, subscribe to the lock channel, then try again after each
// message (LockPubSub) or after the wait the attempt returned.
func (c *Client) GroupLock(ctx context.Context, group string, tid int64, values []string) error {
	return c.wait(ctx, channel(group), func() (time.Duration, error) {
		return c.GroupTryAcquire(ctx, group, tid, values)
	})
}

// GroupUnlock gives back one hold of each of values of group for thread
// tid (RedissonFasterMultiLock.unlockInnerAsync, without the unlock
// latch: each call is a new request). It returns Redisson's reply: nil
// (IllegalMonitorStateException) when the group's key is gone or some
// value's hold of tid has ended or is missing (after the values it does
// hold were given back: the script does not stop at the first), else
// whether every value's last hold was given back. It publishes "0" on the
// group's channel every time the key exists, as the script's
// `if(hasDeleted)` is always true in Lua (0 is true).
func (c *Client) GroupUnlock(ctx context.Context, group string, tid int64, values []string) (freed *bool, err error) {
	fields, lockName := groupFields(values), c.Owner(tid)
	lease := c.Lease.Milliseconds()
	err = c.atomically(ctx, group, func(d rueidis.DedicatedClient) error {
		freed = nil
		now := nowMillis()
		exists, err := d.Do(ctx, d.B().Exists().Key(group).Build()).AsInt64()
		if err != nil {
			return err
		}
		publish := d.B().Publish().Channel(channel(group)).Message("0").Build()
		if exists == 0 {
			return exec(ctx, d, publish)
		}
		hasFailed, allDeleted := false, true
		var cmds []rueidis.Completed
		for _, f := range fields {
			ef, cf := f+":"+lockName+":expire_time", f+":"+lockName+":lock_count"
			end, err := d.Do(ctx, d.B().Hget().Key(group).Field(ef).Build()).AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			if err != nil || end < now {
				allDeleted, hasFailed = false, true
				continue
			}
			count, err := d.Do(ctx, d.B().Hget().Key(group).Field(cf).Build()).AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			if count-1 <= 0 {
				cmds = append(cmds, d.B().Hdel().Key(group).Field(ef, cf, f).Build())
				continue
			}
			cmds = append(cmds, d.B().Hincrby().Key(group).Field(cf).Increment(-1).Build())
			if newEnd := lease + now; end < newEnd {
				cmds = append(cmds, d.B().Hset().Key(group).FieldValue().FieldValue(ef, strconv.FormatInt(newEnd, 10)).Build())
			}
			allDeleted = false
		}
		if hasFailed {
			return exec(ctx, d, cmds...)
		}
		cmds = append(cmds, publish)
		if !allDeleted {
			pttl, err := d.Do(ctx, d.B().Pttl().Key(group).Build()).AsInt64()
			if err != nil {
				return err
			}
			if lease > pttl {
				cmds = append(cmds, d.B().Pexpire().Key(group).Milliseconds(lease).Build())
			}
		}
		if err := exec(ctx, d, cmds...); err != nil {
			return err
		}
		freed = &allDeleted
		return nil
	})
	return freed, err
}

// GroupRenew is one renewal of thread tid's values of group
// (renewal/FastMultilockTask.buildChunk): it reports whether tid still
// held every value, each of whose ends then moved to now + lease.
func (c *Client) GroupRenew(ctx context.Context, group string, tid int64, values []string) (bool, error) {
	fields, lockName := groupFields(values), c.Owner(tid)
	lease := c.Lease.Milliseconds()
	var renewed bool
	err := c.atomically(ctx, group, func(d rueidis.DedicatedClient) error {
		renewed = false
		now := nowMillis()
		var cmds []rueidis.Completed
		for _, f := range fields {
			holder, err := d.Do(ctx, d.B().Hget().Key(group).Field(f).Build()).ToString()
			if err != nil || holder != lockName {
				d.Do(ctx, d.B().Unwatch().Build())
				if rueidis.IsRedisNil(err) {
					return nil
				}
				return err
			}
			ef := f + ":" + lockName + ":expire_time"
			end, err := d.Do(ctx, d.B().Hget().Key(group).Field(ef).Build()).AsInt64()
			if err != nil {
				return err
			}
			if end < now+lease {
				cmds = append(cmds, d.B().Hset().Key(group).FieldValue().FieldValue(ef, strconv.FormatInt(now+lease, 10)).Build())
			}
		}
		pttl, err := d.Do(ctx, d.B().Pttl().Key(group).Build()).AsInt64()
		if err != nil {
			return err
		}
		if pttl < lease {
			cmds = append(cmds, d.B().Pexpire().Key(group).Milliseconds(lease).Build())
		}
		renewed = true
		return exec(ctx, d, cmds...)
	})
	return renewed, err
}
