-- rateavailable.lua: the permits a rate limiter's window has now.
-- RedissonRateLimiter.availablePermitsAsync, step for step (keys: see
-- ratelib.lua).
--
-- Reply: the permits available.
local rate, interval, valueName, permitsName = config()
if rate == nil then
	return redis.error_reply(notSet)
end
local t = nowMs()
local current = redis.call('get', valueName)
if current == false then
	redis.call('set', valueName, rate)
	return rate
end
local expired = redis.call('zrangebyscore', permitsName, 0, t - interval)
local released = taken(expired)
if released > 0 then
	redis.call('zremrangebyscore', permitsName, 0, t - interval)
	current = tonumber(current) + released
	redis.call('set', valueName, current)
end
return tonumber(current)
