-- permitset.lua: set the permit-expirable semaphore's size: available plus
-- taken. RedissonPermitExpirableSemaphore.setPermitsAsync, step for step
-- (keys: see permitlib.lua; it reclaims nothing first, as Redisson).
--
-- wanted   ARGV[1]: the size (>= 0)
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
--
-- The size is published (when above 0), as Redisson does, whenever it
-- changes. Reply: none.

local wanted, pub = ARGV[1], ARGV[2]

local available = redis.call('get', sem)
if available == false then
	redis.call('set', sem, wanted)
	if tonumber(wanted) > 0 then
		if pub ~= '' then redis.call(pub, channel, wanted) end
	end
	return
end
local size = redis.call('zcount', taken, 0, '+inf') + tonumber(available)
if size == tonumber(wanted) then
	return
end
redis.call('incrby', sem, tonumber(wanted) - size)
if tonumber(wanted) > 0 then
	if pub ~= '' then redis.call(pub, channel, wanted) end
end
