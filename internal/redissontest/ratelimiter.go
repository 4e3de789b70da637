package redissontest

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Rate limiters as Redisson 4.7 keeps them
// (redisson/src/main/java/org/redisson/RedissonRateLimiter.java): the hash
// N (rate, interval, type, keepAliveTime), {N}:value and {N}:permits for
// OVERALL, {N}:value:<client-id> and {N}:permits:<client-id> for PER_CLIENT
// (the client id is ServiceManager.getId, here the Client's UUID). Window
// members are struct.pack('Bc0I', 16, random, permits), scored with the
// Java client's clock.

// rateKeys are the KEYS of RedissonRateLimiter's scripts: getRawName,
// getValueName, getClientValueName, getPermitsName, getClientPermitsName.
func (c *Client) rateKeys(name string) []string {
	value, permits := suffixed(name, "value"), suffixed(name, "permits")
	return []string{name, value, suffixed(value, c.id), permits, suffixed(permits, c.id)}
}

// RateTrySetRate is RedissonRateLimiter.trySetRateAsync: HSETNX rate,
// interval, keepAliveTime, type; PEXPIRE when type was set and keepAlive > 0.
func (c *Client) RateTrySetRate(ctx context.Context, name string, perClient bool, rate int64, interval, keepAlive time.Duration) (bool, error) {
	kind := "0" // RateType.OVERALL.ordinal()
	if perClient {
		kind = "1" // RateType.PER_CLIENT.ordinal()
	}
	cmds := []rueidis.Completed{
		c.rdb.B().Hsetnx().Key(name).Field("rate").Value(strconv.FormatInt(rate, 10)).Build(),
		c.rdb.B().Hsetnx().Key(name).Field("interval").Value(strconv.FormatInt(interval.Milliseconds(), 10)).Build(),
		c.rdb.B().Hsetnx().Key(name).Field("keepAliveTime").Value(strconv.FormatInt(keepAlive.Milliseconds(), 10)).Build(),
		c.rdb.B().Hsetnx().Key(name).Field("type").Value(kind).Build(),
	}
	var set bool
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		res := d.DoMulti(ctx, append(append(rueidis.Commands{d.B().Multi().Build()}, cmds...), d.B().Exec().Build())...)
		if err := res[len(res)-1].Error(); err != nil {
			if rueidis.IsRedisNil(err) {
				return errConflict
			}
			return err
		}
		replies, err := res[len(res)-1].ToArray()
		if err != nil {
			return err
		}
		n, _ := replies[3].AsInt64()
		set = n == 1
		if set && keepAlive > 0 {
			return d.Do(ctx, d.B().Pexpire().Key(name).Milliseconds(keepAlive.Milliseconds()).Build()).Error()
		}
		return nil
	})
	return set, err
}

// RateTryAcquire is RedissonRateLimiter.tryAcquireAsync(RedisCommand, Long):
// it returns 0 when the permits were taken, else the ms to wait (res).
func (c *Client) RateTryAcquire(ctx context.Context, name string, permits int64) (int64, error) {
	keys := c.rateKeys(name)
	var res int64
	err := c.atomicallyAll(ctx, keys, func(d rueidis.DedicatedClient) error {
		now := time.Now().UnixMilli() // ARGV[2]: System.currentTimeMillis()
		cfg, err := d.Do(ctx, d.B().Hgetall().Key(name).Build()).AsStrMap()
		if err != nil {
			return err
		}
		rate, _ := strconv.ParseInt(cfg["rate"], 10, 64)
		interval, _ := strconv.ParseInt(cfg["interval"], 10, 64)
		valueName, permitsName := keys[1], keys[3]
		if cfg["type"] == "1" {
			valueName, permitsName = keys[2], keys[4]
		}
		cmds, r, err := c.rateStep(ctx, d, valueName, permitsName, rate, interval, now, permits)
		if err != nil {
			return err
		}
		res = r
		return exec(ctx, d, append(cmds, c.keepAlive(ctx, d, name, cfg["keepAliveTime"], valueName, permitsName)...)...)
	})
	return res, err
}

// rateStep is the body of the tryAcquire script between reading the
// configuration and keeping the keys alive.
func (c *Client) rateStep(ctx context.Context, d rueidis.DedicatedClient, valueName, permitsName string, rate, interval, now, permits int64) ([]rueidis.Completed, int64, error) {
	member := windowMember(permits)
	take := []rueidis.Completed{
		d.B().Zadd().Key(permitsName).ScoreMember().ScoreMember(float64(now), member).Build(),
		d.B().Decrby().Key(valueName).Decrement(permits).Build(),
	}
	current, exists, err := getInt(ctx, d, valueName)
	if err != nil {
		return nil, 0, err
	}
	if !exists {
		return append([]rueidis.Completed{d.B().Set().Key(valueName).Value(strconv.FormatInt(rate, 10)).Build()}, take...), 0, nil
	}
	cut := strconv.FormatInt(now-interval, 10)
	expired, err := d.Do(ctx, d.B().Zrangebyscore().Key(permitsName).Min("0").Max(cut).Build()).AsStrSlice()
	if err != nil {
		return nil, 0, err
	}
	var cmds []rueidis.Completed
	if released := windowSum(expired); released > 0 {
		cmds = append(cmds, d.B().Zremrangebyscore().Key(permitsName).Min("0").Max(cut).Build())
		if current+released > rate {
			all, err := d.Do(ctx, d.B().Zrange().Key(permitsName).Min("0").Max("-1").Build()).AsStrSlice()
			if err != nil {
				return nil, 0, err
			}
			current = rate - (windowSum(all) - released)
		} else {
			current += released
		}
		cmds = append(cmds, d.B().Set().Key(valueName).Value(strconv.FormatInt(current, 10)).Build())
	}
	if current < permits {
		first, err := d.Do(ctx, d.B().Zrange().Key(permitsName).Min("0").Max("0").Withscores().Build()).AsZScores()
		if err != nil || len(first) == 0 {
			return nil, 0, err
		}
		return cmds, 3 + interval - (now - int64(first[0].Score)), nil
	}
	return append(cmds, take...), 0, nil
}

// keepAlive is the scripts' closing step: PEXPIRE every key to
// keepAliveTime when set, else the value and window keys to N's PTTL.
func (c *Client) keepAlive(ctx context.Context, d rueidis.DedicatedClient, name, keep, valueName, permitsName string) []rueidis.Completed {
	if ms, _ := strconv.ParseInt(keep, 10, 64); ms > 0 {
		return []rueidis.Completed{
			d.B().Pexpire().Key(name).Milliseconds(ms).Build(),
			d.B().Pexpire().Key(valueName).Milliseconds(ms).Build(),
			d.B().Pexpire().Key(permitsName).Milliseconds(ms).Build(),
		}
	}
	ttl, _ := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
	if ttl > 0 {
		return []rueidis.Completed{
			d.B().Pexpire().Key(valueName).Milliseconds(ttl).Build(),
			d.B().Pexpire().Key(permitsName).Milliseconds(ttl).Build(),
		}
	}
	return nil
}

// windowMember is struct.pack('Bc0I', 16, random, permits): a length byte,
// 16 random bytes (ServiceManager.generateIdArray), and the permits as a
// 4-byte unsigned int, little-endian as on the servers Redis runs on.
func windowMember(permits int64) string {
	b := make([]byte, 1+16+4)
	b[0] = 16
	for i := 1; i <= 16; i++ {
		b[i] = byte(rand.N(256))
	}
	binary.LittleEndian.PutUint32(b[17:], uint32(permits))
	return string(b)
}

// windowSum adds up the permits of window members (struct.unpack).
func windowSum(members []string) int64 {
	var sum int64
	for _, m := range members {
		if len(m) >= 1 && len(m) >= 1+int(m[0])+4 {
			n := int(m[0])
			sum += int64(binary.LittleEndian.Uint32([]byte(m[1+n : 1+n+4])))
		}
	}
	return sum
}

// RateDelete is RedissonRateLimiter.deleteAsync: DEL of the five names its
// scripts take, this client's own two among them, true when it deleted any
// (RedissonObject.deleteAsync(keys...): DEL_OBJECTS, BooleanAmountReplayConvertor).
func (c *Client) RateDelete(ctx context.Context, name string) (bool, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Del().Key(c.rateKeys(name)...).Build()).AsInt64()
	return n > 0, err
}

// RateRelease is RedissonRateLimiter.releaseAsync: read the configuration
// (the script asserts it is there), set the type's value key to its value
// (the rate when missing) plus permits, capped at the rate, and keep the
// keys alive. The window is left as it is.
func (c *Client) RateRelease(ctx context.Context, name string, permits int64) error {
	keys := c.rateKeys(name)
	return c.atomicallyAll(ctx, keys, func(d rueidis.DedicatedClient) error {
		cfg, err := d.Do(ctx, d.B().Hgetall().Key(name).Build()).AsStrMap()
		if err != nil {
			return err
		}
		if cfg["rate"] == "" || cfg["interval"] == "" || cfg["type"] == "" {
			return errors.New("RateLimiter is not initialized")
		}
		rate, _ := strconv.ParseInt(cfg["rate"], 10, 64)
		valueName, permitsName := keys[1], keys[3]
		if cfg["type"] == "1" {
			valueName, permitsName = keys[2], keys[4]
		}
		current, exists, err := getInt(ctx, d, valueName)
		if err != nil {
			return err
		}
		if !exists {
			current = rate
		}
		value := min(current+permits, rate)
		set := d.B().Set().Key(valueName).Value(strconv.FormatInt(value, 10)).Build()
		return exec(ctx, d, append([]rueidis.Completed{set}, c.keepAlive(ctx, d, name, cfg["keepAliveTime"], valueName, permitsName)...)...)
	})
}

// RateConfig is RedissonRateLimiter.getConfigAsync: HGETALL N, decoded as
// its HGETALL command's decoder does: an empty hash is OVERALL with rate
// and interval 0; else type, interval and rate from their fields.
func (c *Client) RateConfig(ctx context.Context, name string) (perClient bool, rate int64, interval time.Duration, err error) {
	cfg, err := c.rdb.Do(ctx, c.rdb.B().Hgetall().Key(name).Build()).AsStrMap()
	if err != nil || len(cfg) == 0 {
		return false, 0, 0, err
	}
	rate, _ = strconv.ParseInt(cfg["rate"], 10, 64)
	ms, _ := strconv.ParseInt(cfg["interval"], 10, 64)
	return cfg["type"] == "1", rate, time.Duration(ms) * time.Millisecond, nil
}

// RateUpdate is RedissonRateLimiter.setOrUpdateAsync with requireExist 1
// and keepState 1, as updateRate(RateLimiterArgs...keepState(true)) calls
// it: nothing when N is missing; else HSET the four fields and PEXPIRE N
// by keepAlive when set; on a change of type, DEL every value and window
// key; otherwise drop the window's members older than interval, SET the
// type's value to rate less the permits the rest record (0 at least), and
// keep the keys alive. True when N existed.
func (c *Client) RateUpdate(ctx context.Context, name string, perClient bool, rate int64, interval, keepAlive time.Duration) (bool, error) {
	keys := c.rateKeys(name)
	kind := "0"
	if perClient {
		kind = "1"
	}
	var updated bool
	err := c.atomicallyAll(ctx, keys, func(d rueidis.DedicatedClient) error {
		now := time.Now().UnixMilli() // ARGV[5]: System.currentTimeMillis()
		exists, err := d.Do(ctx, d.B().Exists().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		if updated = exists == 1; !updated {
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		valueName, permitsName := keys[1], keys[3]
		if perClient {
			valueName, permitsName = keys[2], keys[4]
		}
		oldType, err := d.Do(ctx, d.B().Hget().Key(name).Field("type").Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		keep := strconv.FormatInt(keepAlive.Milliseconds(), 10)
		cmds := []rueidis.Completed{
			d.B().Hset().Key(name).FieldValue().FieldValue("rate", strconv.FormatInt(rate, 10)).Build(),
			d.B().Hset().Key(name).FieldValue().FieldValue("interval", strconv.FormatInt(interval.Milliseconds(), 10)).Build(),
			d.B().Hset().Key(name).FieldValue().FieldValue("type", kind).Build(),
			d.B().Hset().Key(name).FieldValue().FieldValue("keepAliveTime", keep).Build(),
		}
		if keepAlive > 0 {
			cmds = append(cmds, d.B().Pexpire().Key(name).Milliseconds(keepAlive.Milliseconds()).Build())
		}
		if oldType != "" && oldType != kind {
			return exec(ctx, d, append(cmds, d.B().Del().Key(keys[1:]...).Build())...)
		}
		cut := strconv.FormatInt(now-interval.Milliseconds(), 10)
		kept, err := d.Do(ctx, d.B().Zrangebyscore().Key(permitsName).Min("("+cut).Max("+inf").Build()).AsStrSlice()
		if err != nil {
			return err
		}
		value := max(rate-windowSum(kept), 0)
		cmds = append(cmds,
			d.B().Zremrangebyscore().Key(permitsName).Min("0").Max(cut).Build(),
			d.B().Set().Key(valueName).Value(strconv.FormatInt(value, 10)).Build())
		// keepAlive reads keepAliveTime as written above.
		return exec(ctx, d, append(cmds, c.keepAlive(ctx, d, name, keep, valueName, permitsName)...)...)
	})
	return updated, err
}
