-- permitcount.lua: count a permit-expirable semaphore's permits, after
-- reclaiming those whose lease ended. RedissonPermitExpirableSemaphore
-- .availablePermitsAsync, acquiredPermitsAsync and getPermitsAsync in one
-- (keys: see permitlib.lua): each reclaims the same way first.
--
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: {available, taken}, available 0 when N is missing.

local pub = ARGV[1]

reclaim(nowMs(), -1, pub)
local available = redis.call('get', sem)
if available == false then
	available = 0
end
return {tonumber(available), redis.call('zcount', taken, 0, '+inf')}
