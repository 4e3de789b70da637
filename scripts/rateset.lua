-- rateset.lua: configure a rate limiter, replacing any configuration, and
-- empty its window. RedissonRateLimiter.setRateAsync(RateType, long,
-- Duration, Duration), step for step (keys: see ratelib.lua).
--
-- ARGV: as ratetryset.lua. Reply: none.
local valueName, permitsName = KEYS[2], KEYS[4]
if ARGV[3] == '1' then
	valueName, permitsName = KEYS[3], KEYS[5]
end
writeConfig()
redis.call('del', valueName, permitsName)
