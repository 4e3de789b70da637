-- ratetryset.lua: configure a rate limiter unless it is configured.
-- RedissonRateLimiter.trySetRateAsync(RateType, long, Duration, Duration),
-- step for step (keys: see ratelib.lua; only KEYS[1] is used).
--
-- newRate           ARGV[1]: rate: permits per interval
-- newInterval       ARGV[2]: interval in ms
-- newType           ARGV[3]: type: 0 OVERALL, 1 PER_CLIENT
-- keepAliveMs       ARGV[4]: keepAliveTime in ms, 0 for none
--
-- Reply: 1 when the configuration was set (its type field was missing).

local newRate, newInterval, newType, keepAliveMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

redis.call('hsetnx', configKey, 'rate', newRate)
redis.call('hsetnx', configKey, 'interval', newInterval)
redis.call('hsetnx', configKey, 'keepAliveTime', keepAliveMs)
local res = redis.call('hsetnx', configKey, 'type', newType)
if res == 1 and tonumber(keepAliveMs) > 0 then
	redis.call('pexpire', configKey, keepAliveMs)
end
return res
