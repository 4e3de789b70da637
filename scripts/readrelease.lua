-- readrelease.lua: give back one read hold of a read-write lock. It makes
-- the same changes as Redisson 4.7's RedissonReadLock.unlockInnerAsync.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock's channel, redisson_rwlock:{N}
-- KEYS[3]  this owner's hold-timeout prefix, {N}:<owner>:rwlock_timeout
-- KEYS[4]  the prefix of every owner's timeout keys, {N}
-- KEYS[5]  the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- ARGV[1]  the message published when the lock becomes free ("0")
-- ARGV[2]  owner field
-- ARGV[3]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[4]  latch TTL in milliseconds
--
-- The owner's newest read hold and its timeout key go. If other holds
-- remain, the hash's TTL becomes the longest remaining read hold's (a
-- writer's hold keeps its own TTL). Otherwise the hash is deleted and
-- ARGV[1] published. A lock already gone (it expired) is announced again,
-- as Redisson does, so that waiters need not wait out their timers.
-- Reply: 1 when the lock became free, 0 when holds remain, nil when the
-- owner held no read hold (nothing changes). The latch remembers the reply
-- of this request id, so a retried release returns its first reply instead
-- of releasing a second time.
local earlier = redis.call('get', KEYS[5])
if earlier then
	return tonumber(earlier)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
	if ARGV[3] ~= '' then redis.call(ARGV[3], KEYS[2], ARGV[1]) end
	return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
	return nil
end
local k = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if k == 0 then
	redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (k + 1))
local reply = 1
if redis.call('hlen', KEYS[1]) > 1 then
	local longest = -3
	for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
		local n = tonumber(redis.call('hget', KEYS[1], field))
		if n ~= nil then
			for i = n, 1, -1 do
				longest = math.max(longest, redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i))
			end
		end
	end
	if longest > 0 then
		redis.call('pexpire', KEYS[1], longest)
		reply = 0
	elseif mode == 'write' then
		reply = 0
	end
end
if reply == 1 then
	redis.call('del', KEYS[1])
	if ARGV[3] ~= '' then redis.call(ARGV[3], KEYS[2], ARGV[1]) end
end
redis.call('set', KEYS[5], reply, 'px', ARGV[4])
return reply
