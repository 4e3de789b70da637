-- permitadd.lua: add permits to (or, with a negative count, take them off)
-- a permit-expirable semaphore. RedissonPermitExpirableSemaphore
-- .addPermitsAsync, step for step (keys: see permitlib.lua).
--
-- ARGV[1]  how many
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
--
-- A positive count is published (the count, not the total, as Redisson
-- does here). Reply: none.
local value = redis.call('get', KEYS[1])
if value == false then
	value = 0
end
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
	if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[3], ARGV[1]) end
end
