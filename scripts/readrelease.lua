-- readrelease.lua: give back one read hold of a read-write lock.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock's channel, redisson_rwlock:{N}
-- KEYS[3]  this owner's hold-timeout prefix, {N}:<owner>:rwlock_timeout
-- KEYS[4]  the prefix of every owner's timeout keys, {N}
-- ARGV[1]  the message published when the lock becomes free ("0")
-- ARGV[2]  owner field
-- ARGV[3]  publish command: "publish" or "spublish"
--
-- The owner's newest read hold and its timeout key go. If other holds
-- remain, the hash's TTL becomes the longest remaining read hold's (a
-- writer's hold keeps its own TTL). Otherwise the hash is deleted and
-- ARGV[1] published.
-- Reply: 1 when the lock became free, 0 when holds remain, nil when the
-- owner held no read hold (nothing changes).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
	return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
local k = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if k == 0 then
	redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (k + 1))
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
		return 0
	end
	if mode == 'write' then
		return 0
	end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
