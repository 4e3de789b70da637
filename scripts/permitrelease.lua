-- permitrelease.lua: give back one permit by id.
-- RedissonPermitExpirableSemaphore.tryReleaseAsync(String), step for step
-- (keys: see permitlib.lua).
--
-- ARGV[1]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[2]  the permit id, 16 raw bytes
--
-- Reply: 1 when the permit was taken and is back; 0 when it was not taken
-- (never, or released or reclaimed already), or its lease had ended (it is
-- back too then, as in Redisson). The new total is published when above 0.
local t = nowMs()
local expire = redis.call('zscore', KEYS[2], ARGV[2])
if redis.call('zrem', KEYS[2], ARGV[2]) ~= 1 then
	return 0
end
local value = redis.call('incrby', KEYS[1], 1)
if value > 0 then
	if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[3], value) end
end
if tonumber(expire) <= t then
	return 0
end
return 1
