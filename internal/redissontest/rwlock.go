package redissontest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Read-write locks as Redisson's RReadWriteLock lays them out: hash field
// "mode", readers' "<uuid>:<tid>" counts with a {N}:<owner>:rwlock_timeout:<k>
// key per read hold, the writer's "<uuid>:<tid>:write" count; releases
// published on redisson_rwlock:{N}, "0" by readers and "1" by writers.

func rwChannel(name string) string {
	if strings.Contains(name, "{") {
		return "redisson_rwlock:" + name
	}
	return "redisson_rwlock:{" + name + "}"
}

func timeoutKey(name, owner string, k int64) string {
	prefix := "{" + name + "}"
	if strings.Contains(name, "{") {
		prefix = name
	}
	return prefix + ":" + owner + ":rwlock_timeout:" + strconv.FormatInt(k, 10)
}

// atomically runs body on a dedicated connection with name WATCHed, again
// until its EXEC is not aborted by a concurrent change.
func (c *Client) atomically(ctx context.Context, name string, body func(d rueidis.DedicatedClient) error) error {
	return c.atomicallyAll(ctx, []string{name}, body)
}

// atomicallyAll is atomically with every key in keys WATCHed: body's reads
// and its MULTI/EXEC act as one script would. A body that decides to write
// nothing sends an empty MULTI/EXEC (or UNWATCH) itself.
func (c *Client) atomicallyAll(ctx context.Context, keys []string, body func(d rueidis.DedicatedClient) error) error {
	for {
		err := c.rdb.Dedicated(func(d rueidis.DedicatedClient) error {
			if err := d.Do(ctx, d.B().Watch().Key(keys...).Build()).Error(); err != nil {
				return err
			}
			return body(d)
		})
		if !errors.Is(err, errConflict) {
			return err
		}
	}
}

// exec sends MULTI, cmds, EXEC; a nil EXEC reply means a watched key changed.
func exec(ctx context.Context, d rueidis.DedicatedClient, cmds ...rueidis.Completed) error {
	all := append(append(rueidis.Commands{d.B().Multi().Build()}, cmds...), d.B().Exec().Build())
	res := d.DoMulti(ctx, all...)
	if err := res[len(res)-1].Error(); rueidis.IsRedisNil(err) {
		return errConflict
	} else {
		return err
	}
}

// TryRead makes one read attempt for thread tid: 0 when held, else the PTTL.
func (c *Client) TryRead(ctx context.Context, name string, tid int64) (time.Duration, error) {
	owner := c.Owner(tid)
	var pttl time.Duration
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		mode, err := d.Do(ctx, d.B().Hget().Key(name).Field("mode").Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		writer, _ := d.Do(ctx, d.B().Hexists().Key(name).Field(owner+":write").Build()).AsInt64()
		if mode != "" && mode != "read" && writer == 0 {
			ms, err := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
			d.Do(ctx, d.B().Unwatch().Build())
			pttl = time.Duration(ms) * time.Millisecond
			return err
		}
		n, err := d.Do(ctx, d.B().Hget().Key(name).Field(owner).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		cmds := []rueidis.Completed{
			d.B().Hincrby().Key(name).Field(owner).Increment(1).Build(),
			d.B().Set().Key(timeoutKey(name, owner, n+1)).Value("1").PxMilliseconds(c.Lease.Milliseconds()).Build(),
			d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build(),
		}
		if mode == "" {
			cmds = append([]rueidis.Completed{d.B().Hset().Key(name).FieldValue().FieldValue("mode", "read").Build()}, cmds...)
		}
		return exec(ctx, d, cmds...)
	})
	return pttl, err
}

// TryWrite makes one write attempt for thread tid: 0 when held, else the PTTL.
func (c *Client) TryWrite(ctx context.Context, name string, tid int64) (time.Duration, error) {
	field := c.Owner(tid) + ":write"
	var pttl time.Duration
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		mode, err := d.Do(ctx, d.B().Hget().Key(name).Field("mode").Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
		mine, _ := d.Do(ctx, d.B().Hexists().Key(name).Field(field).Build()).AsInt64()
		if mode != "" && !(mode == "write" && mine == 1) {
			ms, err := d.Do(ctx, d.B().Pttl().Key(name).Build()).AsInt64()
			d.Do(ctx, d.B().Unwatch().Build())
			pttl = time.Duration(ms) * time.Millisecond
			return err
		}
		return exec(ctx, d,
			d.B().Hset().Key(name).FieldValue().FieldValue("mode", "write").Build(),
			d.B().Hincrby().Key(name).Field(field).Increment(1).Build(),
			d.B().Pexpire().Key(name).Milliseconds(c.Lease.Milliseconds()).Build())
	})
	return pttl, err
}

// Read waits for the read side as Redisson does.
func (c *Client) Read(ctx context.Context, name string, tid int64) error {
	return c.wait(ctx, rwChannel(name), func() (time.Duration, error) { return c.TryRead(ctx, name, tid) })
}

// Write waits for the write side as Redisson does.
func (c *Client) Write(ctx context.Context, name string, tid int64) error {
	return c.wait(ctx, rwChannel(name), func() (time.Duration, error) { return c.TryWrite(ctx, name, tid) })
}

// ReadUnlock releases one read hold of thread tid; the last hold of the
// lock deletes it and publishes "0".
func (c *Client) ReadUnlock(ctx context.Context, name string, tid int64) error {
	owner := c.Owner(tid)
	return c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		n, err := d.Do(ctx, d.B().Hget().Key(name).Field(owner).Build()).AsInt64()
		if err != nil {
			return err
		}
		fields, err := d.Do(ctx, d.B().Hlen().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		cmds := []rueidis.Completed{d.B().Del().Key(timeoutKey(name, owner, n)).Build()}
		switch {
		case n > 1:
			cmds = append(cmds, d.B().Hincrby().Key(name).Field(owner).Increment(-1).Build())
		case fields > 2: // mode, this reader, and others
			cmds = append(cmds, d.B().Hdel().Key(name).Field(owner).Build())
		default:
			cmds = append(cmds, d.B().Del().Key(name).Build(), d.B().Publish().Channel(rwChannel(name)).Message("0").Build())
		}
		return exec(ctx, d, cmds...)
	})
}

// WriteUnlock releases one write hold of thread tid; the last one frees the
// lock (or leaves it to the writer's read holds) and publishes "1".
func (c *Client) WriteUnlock(ctx context.Context, name string, tid int64) error {
	field := c.Owner(tid) + ":write"
	return c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		n, err := d.Do(ctx, d.B().Hget().Key(name).Field(field).Build()).AsInt64()
		if err != nil {
			return err
		}
		fields, err := d.Do(ctx, d.B().Hlen().Key(name).Build()).AsInt64()
		if err != nil {
			return err
		}
		switch {
		case n > 1:
			return exec(ctx, d, d.B().Hincrby().Key(name).Field(field).Increment(-1).Build())
		case fields > 2:
			return exec(ctx, d, d.B().Hdel().Key(name).Field(field).Build(),
				d.B().Hset().Key(name).FieldValue().FieldValue("mode", "read").Build(),
				d.B().Publish().Channel(rwChannel(name)).Message("1").Build())
		}
		return exec(ctx, d, d.B().Del().Key(name).Build(), d.B().Publish().Channel(rwChannel(name)).Message("1").Build())
	})
}

// ReadRenew is one watchdog renewal of thread tid's read holds of name, as
// Redisson 4.4 and later send it (renewal/ReadLockTask.buildChunk, for
// #7098): for each lock name of the entry (here tid's owner) whose count
// is in the hash, that owner's own rwlock_timeout keys, count down to 1,
// get the lease, and the hash gets it when any owner was there. It reports
// whether tid's owner was. Redisson before 4.4
// (RedissonReadLock.renewExpirationAsync) renewed every reader's timeout
// keys, whoever held them, so one live reader kept a dead one's keys for
// as long as it read (#1458).
func (c *Client) ReadRenew(ctx context.Context, name string, tid int64) (bool, error) {
	owner, lease := c.Owner(tid), c.Lease.Milliseconds()
	var alive bool
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		// "local counter = redis.call('hget', KEYS[i], ARGV[argIdx])"
		n, err := d.Do(ctx, d.B().Hget().Key(name).Field(owner).Build()).AsInt64()
		if rueidis.IsRedisNil(err) {
			alive = false
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		if err != nil {
			return err
		}
		alive = true
		// "for c=counter, 1, -1 do redis.call('pexpire', KEYS[i+1] .. ':' ..
		// ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1])"
		var cmds []rueidis.Completed
		for k := n; k >= 1; k-- {
			cmds = append(cmds, d.B().Pexpire().Key(timeoutKey(name, owner, k)).Milliseconds(lease).Build())
		}
		// "if (anyAlive) then redis.call('pexpire', KEYS[i], ARGV[1])"
		cmds = append(cmds, d.B().Pexpire().Key(name).Milliseconds(lease).Build())
		return exec(ctx, d, cmds...)
	})
	return alive, err
}
