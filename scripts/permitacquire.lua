-- permitacquire.lua: take permits of a permit-expirable semaphore, each
-- under its own id, or none. RedissonPermitExpirableSemaphore
-- .tryAcquireAsync(List, long), step for step (keys: see permitlib.lua).
--
-- count    ARGV[1]: how many permits (> 0)
-- lease    ARGV[2]: the lease in ms, 0 for none
-- pub      ARGV[3]: publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[4..] the new permits' ids, 16 raw bytes each, count of them
--
-- Reply: {1, score} when taken (score: the lease end written, as ZADD got
-- it); else {0, ms} with ms until the nearest lease ends
-- (a permit may come back then without any message), or {0} when no
-- taken permit has a lease.

local count, lease, pub = ARGV[1], ARGV[2], ARGV[3]

local t = nowMs()
reclaim(t, count, pub)
local value = redis.call('get', sem)
if value ~= false and tonumber(value) >= tonumber(count) then
	redis.call('decrby', sem, count)
	local score = expiry(t, lease)
	for i = 4, #ARGV do
		redis.call('zadd', taken, score, ARGV[i])
	end
	local ttl = redis.call('pttl', sem)
	if ttl > 0 then
		redis.call('pexpire', taken, ttl)
	end
	return {1, score}
end
local nearest = redis.call('zrange', taken, 0, 0, 'withscores')
if nearest[1] ~= nil and nearest[2] ~= noLease then
	return {0, math.max(0, tonumber(nearest[2]) - t)}
end
return {0}
