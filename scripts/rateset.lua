-- rateset.lua: configure a rate limiter, replacing any configuration, and
-- empty its window. RedissonRateLimiter.setRateAsync(RateType, long,
-- Duration, Duration), step for step (keys: see ratelib.lua).
--
-- ARGV: as ratetryset.lua. Reply: none.
local valueName, permitsName = KEYS[2], KEYS[4]
if ARGV[3] == '1' then
	valueName, permitsName = KEYS[3], KEYS[5]
end
redis.call('hset', KEYS[1], 'rate', ARGV[1])
redis.call('hset', KEYS[1], 'interval', ARGV[2])
redis.call('hset', KEYS[1], 'type', ARGV[3])
redis.call('hset', KEYS[1], 'keepAliveTime', ARGV[4])
if tonumber(ARGV[4]) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[4])
end
redis.call('del', valueName, permitsName)
