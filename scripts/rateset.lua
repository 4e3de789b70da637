-- rateset.lua: configure a rate limiter, replacing any configuration, and
-- empty its window. RedissonRateLimiter.setRateAsync(RateType, long,
-- Duration, Duration), step for step (keys: see ratelib.lua).
--
-- newRate, newInterval, newType, keepAliveMs  ARGV[1..4]: as in
-- ratetryset.lua. Reply: none.

local newRate, newInterval, newType, keepAliveMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local valueName, permitsName = valueKey, permitsKey
if newType == '1' then
	valueName, permitsName = clientValueKey, clientPermitsKey
end
writeConfig(newRate, newInterval, newType, keepAliveMs)
redis.call('del', valueName, permitsName)
