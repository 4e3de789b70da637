-- permitadd.lua: add permits to (or, with a negative count, take them off)
-- a permit-expirable semaphore. RedissonPermitExpirableSemaphore
-- .addPermitsAsync, step for step (keys: see permitlib.lua).
--
-- count    ARGV[1]: how many
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
--
-- A positive count is published (the count, not the total, as Redisson
-- does here). Reply: none.

local count, pub = ARGV[1], ARGV[2]

local value = redis.call('get', sem)
if value == false then
	value = 0
end
redis.call('set', sem, tonumber(value) + tonumber(count))
if tonumber(count) > 0 then
	if pub ~= '' then redis.call(pub, channel, count) end
end
