-- rateupdate.lua: change a configured rate limiter's configuration and
-- keep its window's state. RedissonRateLimiter.setOrUpdateAsync with
-- requireExist 1 (updateRate) and keepState 1, step for step (keys: see
-- ratelib.lua), but for the clock: Redis's TIME where Redisson passes its
-- JVM's.
--
-- ARGV[1..4]  rate, interval (ms), type (0 OVERALL, 1 PER_CLIENT) and
--             keepAliveTime (ms, 0 for none), as ratetryset.lua
--
-- The permits available become the new rate less those taken in the
-- window (as recorded, from now back one new interval), 0 at least. A
-- change of type empties every window instead, as in Redisson.
--
-- Reply: 1 when the limiter was configured (and now is so), else 0 and
-- nothing changes.
if redis.call('exists', KEYS[1]) == 0 then
	return 0
end
local valueName, permitsName = KEYS[2], KEYS[4]
if ARGV[3] == '1' then
	valueName, permitsName = KEYS[3], KEYS[5]
end
local oldType = redis.call('hget', KEYS[1], 'type')
writeConfig()
if oldType ~= false and oldType ~= ARGV[3] then
	redis.call('del', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
	return 1
end
local rate, interval = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('zremrangebyscore', permitsName, 0, nowMs() - interval)
local newValue = rate - taken(redis.call('zrange', permitsName, 0, -1))
if newValue < 0 then
	newValue = 0
end
redis.call('set', valueName, newValue)
keepAlive(valueName, permitsName)
return 1
