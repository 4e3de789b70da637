-- writerelease.lua: give back one write hold of a read-write lock. It
-- makes the same changes as Redisson 4.7's
-- RedissonWriteLock.unlockInnerAsync, and one more (below).
--
-- lock        KEYS[1]: the lock hash N
-- channel     KEYS[2]: the lock's channel, redisson_rwlock:{N}
-- latch       KEYS[3]: the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- message     ARGV[1]: the message published when the writer leaves ("1": wake all)
-- lease       ARGV[2]: lease in milliseconds, restored while write holds remain
-- writeField  ARGV[3]: the owner's write field
-- pub         ARGV[4]: publish command: "publish", "spublish", or "" to announce nothing
-- latchTTL    ARGV[5]: latch TTL in milliseconds
--
-- When the last write hold goes, the lock becomes free (hash deleted), or,
-- if the writer also holds read holds (it downgraded), stays held for
-- reading. Either way message wakes every waiter: readers may now enter.
-- (Redisson publishes only when the lock becomes free; its readers notice a
-- downgrade by their timers. The extra message only makes them try sooner.)
-- A lock already gone (it expired) is announced again, as Redisson does.
-- Reply: 1 when the write side was released, 0 when write holds remain,
-- nil when the owner did not hold it for writing (nothing changes). The
-- latch remembers the reply of this request id, so a retried release
-- returns its first reply instead of releasing a second time.

local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local message, lease, writeField, pub, latchTTL = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local earlier = latchedReply(latch)
if earlier then
	return earlier
end
local mode = redis.call('hget', lock, 'mode')
if mode == false then
	if pub ~= '' then redis.call(pub, channel, message) end
	return nil
end
if mode ~= 'write' or redis.call('hexists', lock, writeField) == 0 then
	return nil
end
local reply = 0
if redis.call('hincrby', lock, writeField, -1) > 0 then
	redis.call('pexpire', lock, lease)
else
	redis.call('hdel', lock, writeField)
	if redis.call('hlen', lock) == 1 then
		redis.call('del', lock)
	else
		redis.call('hset', lock, 'mode', 'read')
	end
	if pub ~= '' then redis.call(pub, channel, message) end
	reply = 1
end
latchReply(latch, reply, latchTTL)
return reply
