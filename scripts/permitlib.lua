-- permitlib.lua: shared by every script of the permit-expirable semaphore
-- (RedissonPermitExpirableSemaphore); prepended to each body, it only
-- defines functions. Each script has the same keys:
--
-- sem      KEYS[1]: the semaphore N, a string holding the available permits
-- taken    KEYS[2]: the permits taken, ZSET {N}:timeout: permit id (16 raw bytes) ->
--          the time (ms) its lease ends, or 922337203685477 for no lease
-- channel  KEYS[3]: the channel, redisson_sc:{N}

local sem, taken, channel = KEYS[1], KEYS[2], KEYS[3]

local nowMs, nowSubMs, nowMicros = clockLib()

-- noLease is Redisson's nonExpirableTimeout: the score of a permit taken
-- without a lease. Scores are passed to ZADD as strings: Lua would write
-- this number as 9.2233720368548e+14, which is another score.
local noLease = '922337203685477'

-- ms formats a time in milliseconds for ZADD, digit for digit.
local function ms(t)
	return string.format('%.0f', t)
end

-- reclaim gives the permits whose lease ended by t back to N (at most
-- limit of them, -1 for all) and publishes the new total when it is above
-- 0, as every script of Redisson's does first (the "expiredIds" step).
local function reclaim(t, limit, publish)
	local expired = redis.call('zrangebyscore', taken, 0, t, 'limit', 0, limit)
	if #expired == 0 then
		return
	end
	redis.call('zrem', taken, unpack(expired))
	local value = redis.call('incrby', sem, #expired)
	if value > 0 then
		if publish ~= '' then redis.call(publish, channel, value) end
	end
end

-- expiry is the score of a permit leased for lease ms from t (0: no lease).
local function expiry(t, lease)
	if tonumber(lease) == 0 then
		return noLease
	end
	return ms(t + tonumber(lease))
end
