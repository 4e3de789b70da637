-- permitrelease.lua: give back one permit by id.
-- RedissonPermitExpirableSemaphore.tryReleaseAsync(String), step for step
-- (keys: see permitlib.lua).
--
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
-- id       ARGV[2]: the permit id, 16 raw bytes
--
-- Reply: 1 when the permit was taken and is back; 0 when it was not taken
-- (never, or released or reclaimed already), or its lease had ended (it is
-- back too then, as in Redisson). The new total is published when above 0.

local pub, id = ARGV[1], ARGV[2]

local t = nowMs()
local expire = redis.call('zscore', taken, id)
if redis.call('zrem', taken, id) ~= 1 then
	return 0
end
local value = redis.call('incrby', sem, 1)
if value > 0 then
	if pub ~= '' then redis.call(pub, channel, value) end
end
if tonumber(expire) <= t then
	return 0
end
return 1
