-- permitlease.lua: give a taken permit a new lease.
-- RedissonPermitExpirableSemaphore.updateLeaseTimeAsync, step for step
-- (keys: see permitlib.lua).
--
-- ARGV[1]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[2]  the permit id, 16 raw bytes
-- ARGV[3]  the new lease in ms from now, 0 for none
--
-- Reply: 1 when the permit is taken and now ends its lease ARGV[3] from
-- now; 0 when it is not taken (or was reclaimed by this call).
local t = nowMs()
reclaim(t, -1, ARGV[1])
if redis.call('zscore', KEYS[2], ARGV[2]) == false then
	return 0
end
redis.call('zadd', KEYS[2], expiry(t, ARGV[3]), ARGV[2])
return 1
