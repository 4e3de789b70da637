-- semtryset.lua: set a semaphore's permits if it has none yet.
-- RedissonSemaphore.trySetPermitsAsync, with or without a time to live
-- (the permit-expirable semaphore's trySetPermitsAsync is the same script
-- without one).
--
-- KEYS[1]  the semaphore N
-- KEYS[2]  its channel, redisson_sc:{N}
-- ARGV[1]  the permits (>= 0)
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[3]  N's time to live in ms, as SET's PX; "" for none
--
-- Reply: 1 when N was missing and is now set (and the count published when
-- above 0), else 0 and nothing changes.
if redis.call('get', KEYS[1]) ~= false then
	return 0
end
if ARGV[3] ~= '' then
	redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
	redis.call('set', KEYS[1], ARGV[1])
end
if tonumber(ARGV[1]) > 0 then
	if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
end
return 1
