-- semtryset.lua: set a semaphore's permits if it has none yet.
-- RedissonSemaphore.trySetPermitsAsync, with or without a time to live
-- (the permit-expirable semaphore's trySetPermitsAsync is the same script
-- without one).
--
-- sem      KEYS[1]: the semaphore N
-- channel  KEYS[2]: its channel, redisson_sc:{N}
-- permits  ARGV[1]: the permits (>= 0)
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
-- ttl      ARGV[3]: N's time to live in ms, as SET's PX; "" for none
--
-- Reply: 1 when N was missing and is now set (and the count published when
-- above 0), else 0 and nothing changes.

local sem, channel = KEYS[1], KEYS[2]
local permits, pub, ttl = ARGV[1], ARGV[2], ARGV[3]

if redis.call('get', sem) ~= false then
	return 0
end
if ttl ~= '' then
	redis.call('set', sem, permits, 'px', ttl)
else
	redis.call('set', sem, permits)
end
if tonumber(permits) > 0 then
	if pub ~= '' then redis.call(pub, channel, permits) end
end
return 1
