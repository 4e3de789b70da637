-- raterelease.lua: give permits back to a rate limiter's window.
-- RedissonRateLimiter.releaseAsync, step for step (keys: see ratelib.lua):
-- the permits available now grow by count, to the rate at most; the
-- window's members stay, as in Redisson.
--
-- count             ARGV[1]: the permits (>= 1)
--
-- Reply: none, or the error notSet.

local count = ARGV[1]

local rate, _, valueName, permitsName = config()
if rate == nil then
	return redis.error_reply(notSet)
end
local current = redis.call('get', valueName)
if current == false then
	current = rate
else
	current = tonumber(current)
end
redis.call('set', valueName, math.min(current + tonumber(count), rate))
keepAlive(valueName, permitsName)
