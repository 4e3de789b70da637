-- permitcount.lua: count a permit-expirable semaphore's permits, after
-- reclaiming those whose lease ended. RedissonPermitExpirableSemaphore
-- .availablePermitsAsync, acquiredPermitsAsync and getPermitsAsync in one
-- (keys: see permitlib.lua): each reclaims the same way first.
--
-- ARGV[1]  publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: {available, taken}, available 0 when N is missing.
reclaim(nowMs(), -1, ARGV[1])
local available = redis.call('get', KEYS[1])
if available == false then
	available = 0
end
return {tonumber(available), redis.call('zcount', KEYS[2], 0, '+inf')}
