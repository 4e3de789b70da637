-- rateupdate.lua: change a configured rate limiter's configuration and
-- keep its window's state. RedissonRateLimiter.setOrUpdateAsync with
-- requireExist 1 (updateRate) and keepState 1, step for step (keys: see
-- ratelib.lua), but for the clock: Redis's TIME where Redisson passes its
-- JVM's.
--
-- newRate, newInterval, newType, keepAliveMs  ARGV[1..4]: rate, interval
--             (ms), type (0 OVERALL, 1 PER_CLIENT) and
--             keepAliveTime (ms, 0 for none), as ratetryset.lua
--
-- The permits available become the new rate less those taken in the
-- window (as recorded, from now back one new interval), 0 at least. A
-- change of type empties every window instead, as in Redisson.
--
-- Reply: 1 when the limiter was configured (and now is so), else 0 and
-- nothing changes.

local newRate, newInterval, newType, keepAliveMs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('exists', configKey) == 0 then
	return 0
end
local valueName, permitsName = valueKey, permitsKey
if newType == '1' then
	valueName, permitsName = clientValueKey, clientPermitsKey
end
local oldType = redis.call('hget', configKey, 'type')
writeConfig(newRate, newInterval, newType, keepAliveMs)
if oldType ~= false and oldType ~= newType then
	redis.call('del', valueKey, clientValueKey, permitsKey, clientPermitsKey)
	return 1
end
local rate, interval = tonumber(newRate), tonumber(newInterval)
redis.call('zremrangebyscore', permitsName, 0, nowMs() - interval)
local newValue = rate - taken(redis.call('zrange', permitsName, 0, -1))
if newValue < 0 then
	newValue = 0
end
redis.call('set', valueName, newValue)
keepAlive(valueName, permitsName)
return 1
