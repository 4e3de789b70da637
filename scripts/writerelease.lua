-- writerelease.lua: give back one write hold of a read-write lock.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock's channel, redisson_rwlock:{N}
-- ARGV[1]  the message published when the writer leaves ("1": wake all)
-- ARGV[2]  lease in milliseconds, restored while write holds remain
-- ARGV[3]  the owner's write field
-- ARGV[4]  publish command: "publish" or "spublish"
--
-- When the last write hold goes, the lock becomes free (hash deleted), or,
-- if the writer also holds read holds (it downgraded), stays held for
-- reading; either way ARGV[1] wakes every waiter.
-- Reply: 1 when the write side was released, 0 when write holds remain,
-- nil when the owner did not hold it for writing (nothing changes).
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
	return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[2])
	return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
	redis.call('del', KEYS[1])
else
	redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 1
