package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// Redisson's own lock and unlock, as Redis runs them: the same commands in
// the same order as RedissonLock.tryLockInnerAsync and unlockInnerAsync
// (redisson/src/main/java/org/redisson/RedissonLock.java), followed, as
// RedissonBaseLock.unlockInnerAsync(threadId, requestId) does, by a DEL of
// the unlock latch that the unlock does not wait for. It cannot wait for a
// held lock: it measures what Redisson's layout costs Redis per pair, next
// to relock's scripts for the same layout (-floor).
var (
	redissonLock = rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return nil
end
return redis.call('pttl', KEYS[1])`)
	redissonUnlock = rueidis.NewLuaScript(`
local latched = redis.call('get', KEYS[3])
if latched then
	return tonumber(latched)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
	return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[2])
	redis.call('set', KEYS[3], 0, 'px', ARGV[5])
	return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[5])
return 1`)
)

type redissonScriptsLocker struct {
	rdb rueidis.Client
	id  string
}

func newRedissonScripts(addr string) (locker, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return redissonScriptsLocker{rdb: rdb, id: uuid.NewString()}, nil
}

var errHeld = errors.New("Redisson's lock scripts: the lock is held, and this stand-in does not wait")

func (r redissonScriptsLocker) lock(ctx context.Context, name string) (func() error, error) {
	owner := r.id + ":1" // one "thread" per lock name in the scenarios it runs
	err := redissonLock.Exec(ctx, r.rdb, []string{name}, []string{"30000", owner}).Error()
	if err == nil {
		return nil, errHeld
	}
	if !rueidis.IsRedisNil(err) {
		return nil, err
	}
	return func() error {
		// Redisson's key names, as relock names them too.
		latch := scripts.Release{Key: name, RequestID: uuid.NewString()}.Latch()
		// The latch's TTL is Redisson's (timeout + retry delay) x retry
		// attempts, at most, with BaseConfig's defaults: (3 s + 2 s) x 4.
		err := redissonUnlock.Exec(context.Background(), r.rdb,
			[]string{name, scripts.LockChannel(name), latch},
			[]string{"0", "30000", owner, "publish", "20000"}).Error()
		if err != nil && !rueidis.IsRedisNil(err) {
			return fmt.Errorf("Redisson's unlock: %w", err)
		}
		go r.rdb.Do(context.Background(), r.rdb.B().Del().Key(latch).Build())
		return nil
	}, nil
}

func (r redissonScriptsLocker) close() { r.rdb.Close() }
