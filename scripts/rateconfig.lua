-- rateconfig.lua: a rate limiter's configuration, which
-- RedissonRateLimiter.getConfigAsync reads with HGETALL. A script, not
-- HGETALL, for count.lua's reason: rueidis sends a read again and again
-- while the connection is down, until the caller's ctx ends.
--
-- Reply: rate, interval (ms), type and keepAliveTime (ms; nil when a
-- Redisson older than keepAliveTime set it), or the error notSet.
local c = redis.call('hmget', configKey, 'rate', 'interval', 'type', 'keepAliveTime')
if c[1] == false or c[2] == false or c[3] == false then
	return redis.error_reply(notSet)
end
return c
