-- permitset.lua: set the permit-expirable semaphore's size: available plus
-- taken. RedissonPermitExpirableSemaphore.setPermitsAsync, step for step
-- (keys: see permitlib.lua; it reclaims nothing first, as Redisson).
--
-- ARGV[1]  the size (>= 0)
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
--
-- The size is published (when above 0), as Redisson does, whenever it
-- changes. Reply: none.
local available = redis.call('get', KEYS[1])
if available == false then
	redis.call('set', KEYS[1], ARGV[1])
	if tonumber(ARGV[1]) > 0 then
		if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[3], ARGV[1]) end
	end
	return
end
local size = redis.call('zcount', KEYS[2], 0, '+inf') + tonumber(available)
if size == tonumber(ARGV[1]) then
	return
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - size)
if tonumber(ARGV[1]) > 0 then
	if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[3], ARGV[1]) end
end
