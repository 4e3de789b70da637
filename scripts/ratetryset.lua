-- ratetryset.lua: configure a rate limiter unless it is configured.
-- RedissonRateLimiter.trySetRateAsync(RateType, long, Duration, Duration),
-- step for step (keys: see ratelib.lua; only KEYS[1] is used).
--
-- ARGV[1]  rate: permits per interval
-- ARGV[2]  interval in ms
-- ARGV[3]  type: 0 OVERALL, 1 PER_CLIENT
-- ARGV[4]  keepAliveTime in ms, 0 for none
--
-- Reply: 1 when the configuration was set (its type field was missing).
redis.call('hsetnx', KEYS[1], 'rate', ARGV[1])
redis.call('hsetnx', KEYS[1], 'interval', ARGV[2])
redis.call('hsetnx', KEYS[1], 'keepAliveTime', ARGV[4])
local res = redis.call('hsetnx', KEYS[1], 'type', ARGV[3])
if res == 1 and tonumber(ARGV[4]) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[4])
end
return res
