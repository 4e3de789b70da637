-- permitacquire.lua: take permits of a permit-expirable semaphore, each
-- under its own id, or none. RedissonPermitExpirableSemaphore
-- .tryAcquireAsync(List, long), step for step (keys: see permitlib.lua).
--
-- ARGV[1]   how many permits (> 0)
-- ARGV[2]   the lease in ms, 0 for none
-- ARGV[3]   publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[4..] the new permits' ids, 16 raw bytes each, ARGV[1] of them
--
-- Reply: {1, score} when taken (score: the lease end written, as ZADD got
-- it); else {0, ms} with ms until the nearest lease ends
-- (a permit may come back then without any message), or {0} when no
-- taken permit has a lease.
local t = nowMs()
reclaim(t, ARGV[1], ARGV[3])
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
	redis.call('decrby', KEYS[1], ARGV[1])
	local score = expiry(t, ARGV[2])
	for i = 4, #ARGV do
		redis.call('zadd', KEYS[2], score, ARGV[i])
	end
	local ttl = redis.call('pttl', KEYS[1])
	if ttl > 0 then
		redis.call('pexpire', KEYS[2], ttl)
	end
	return {1, score}
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if nearest[1] ~= nil and nearest[2] ~= noLease then
	return {0, math.max(0, tonumber(nearest[2]) - t)}
end
return {0}
