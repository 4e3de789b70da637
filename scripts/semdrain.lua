-- semdrain.lua: take every available permit.
-- RedissonSemaphore.drainPermitsAsync.
--
-- sem  KEYS[1]: the semaphore N
--
-- Reply: how many there were (0 when N is missing, and then N stays
-- missing). N is set to 0.

local sem = KEYS[1]

local value = redis.call('get', sem)
if value == false then
	return 0
end
redis.call('set', sem, 0)
return tonumber(value)
