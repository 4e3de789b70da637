-- readrelease.lua: give back one read hold of a read-write lock. It makes
-- the same changes as Redisson 4.7's RedissonReadLock.unlockInnerAsync.
--
-- lock            KEYS[1]: the lock hash N
-- channel         KEYS[2]: the lock's channel, redisson_rwlock:{N}
-- timeoutPrefix   KEYS[3]: this owner's hold-timeout prefix, {N}:<owner>:rwlock_timeout
-- timeoutsPrefix  KEYS[4]: the prefix of every owner's timeout keys, {N}
-- latch           KEYS[5]: the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- message         ARGV[1]: the message published when the lock becomes free ("0")
-- owner           ARGV[2]: owner field
-- pub             ARGV[3]: publish command: "publish", "spublish", or "" to announce nothing
-- latchTTL        ARGV[4]: latch TTL in milliseconds
--
-- The owner's newest read hold and its timeout key go. If other holds
-- remain, the hash's TTL becomes the longest remaining read hold's (a
-- writer's hold keeps its own TTL). Otherwise the hash is deleted and
-- message published. A lock already gone (it expired) is announced again,
-- as Redisson does, so that waiters need not wait out their timers.
-- Reply: 1 when the lock became free, 0 when holds remain, nil when the
-- owner held no read hold (nothing changes). The latch remembers the reply
-- of this request id, so a retried release returns its first reply instead
-- of releasing a second time.

local lock, channel, timeoutPrefix, timeoutsPrefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local message, owner, pub, latchTTL = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local earlier = latchedReply(latch)
if earlier then
	return earlier
end
local mode = redis.call('hget', lock, 'mode')
if mode == false then
	if pub ~= '' then redis.call(pub, channel, message) end
	return nil
end
if redis.call('hexists', lock, owner) == 0 then
	return nil
end
local k = redis.call('hincrby', lock, owner, -1)
if k == 0 then
	redis.call('hdel', lock, owner)
end
redis.call('del', timeoutPrefix .. ':' .. (k + 1))
local reply = 1
if redis.call('hlen', lock) > 1 then
	local longest = -3
	for _, field in ipairs(redis.call('hkeys', lock)) do
		local n = tonumber(redis.call('hget', lock, field))
		if n ~= nil then
			for i = n, 1, -1 do
				longest = math.max(longest, redis.call('pttl', timeoutsPrefix .. ':' .. field .. ':rwlock_timeout:' .. i))
			end
		end
	end
	if longest > 0 then
		redis.call('pexpire', lock, longest)
		reply = 0
	elseif mode == 'write' then
		reply = 0
	end
end
if reply == 1 then
	redis.call('del', lock)
	if pub ~= '' then redis.call(pub, channel, message) end
end
latchReply(latch, reply, latchTTL)
return reply
