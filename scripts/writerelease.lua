-- writerelease.lua: give back one write hold of a read-write lock. It
-- makes the same changes as Redisson 4.7's
-- RedissonWriteLock.unlockInnerAsync, and one more (below).
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock's channel, redisson_rwlock:{N}
-- KEYS[3]  the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- ARGV[1]  the message published when the writer leaves ("1": wake all)
-- ARGV[2]  lease in milliseconds, restored while write holds remain
-- ARGV[3]  the owner's write field
-- ARGV[4]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[5]  latch TTL in milliseconds
--
-- When the last write hold goes, the lock becomes free (hash deleted), or,
-- if the writer also holds read holds (it downgraded), stays held for
-- reading. Either way ARGV[1] wakes every waiter: readers may now enter.
-- (Redisson publishes only when the lock becomes free; its readers notice a
-- downgrade by their timers. The extra message only makes them try sooner.)
-- A lock already gone (it expired) is announced again, as Redisson does.
-- Reply: 1 when the write side was released, 0 when write holds remain,
-- nil when the owner did not hold it for writing (nothing changes). The
-- latch remembers the reply of this request id, so a retried release
-- returns its first reply instead of releasing a second time.
local earlier = redis.call('get', KEYS[3])
if earlier then
	return tonumber(earlier)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
	if ARGV[4] ~= '' then redis.call(ARGV[4], KEYS[2], ARGV[1]) end
	return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
	return nil
end
local reply = 0
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[2])
else
	redis.call('hdel', KEYS[1], ARGV[3])
	if redis.call('hlen', KEYS[1]) == 1 then
		redis.call('del', KEYS[1])
	else
		redis.call('hset', KEYS[1], 'mode', 'read')
	end
	if ARGV[4] ~= '' then redis.call(ARGV[4], KEYS[2], ARGV[1]) end
	reply = 1
end
redis.call('set', KEYS[3], reply, 'px', ARGV[5])
return reply
