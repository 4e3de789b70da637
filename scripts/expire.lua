-- expire.lua: set or clear the time to live of every key of one object.
-- RedissonExpirable.expireAsync(timeToLive, unit, param, keys...) with no
-- param, and clearExpireAsync(keys...) (PEXPIRE or PERSIST on each key).
--
-- KEYS     the object's keys, its name first
-- ttl  ARGV[1]: the time to live in ms; "" to clear it (PERSIST)
--
-- Reply: 1 when some key's time to live was set (or cleared), else 0.

local ttl = ARGV[1]

local result = 0
for j = 1, #KEYS do
	local changed
	if ttl ~= '' then
		changed = redis.call('pexpire', KEYS[j], ttl)
	else
		changed = redis.call('persist', KEYS[j])
	end
	if changed == 1 then
		result = 1
	end
end
return result
