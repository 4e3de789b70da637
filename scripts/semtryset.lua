-- semtryset.lua: set a semaphore's permits if it has none yet.
-- RedissonSemaphore.trySetPermitsAsync (and, with KEYS[3], the permit-
-- expirable semaphore's, which is the same script).
--
-- KEYS[1]  the semaphore N
-- KEYS[2]  its channel, redisson_sc:{N}
-- ARGV[1]  the permits (>= 0)
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when N was missing and is now set (and the count published when
-- above 0), else 0 and nothing changes.
if redis.call('get', KEYS[1]) ~= false then
	return 0
end
redis.call('set', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 then
	if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
end
return 1
