-- permitlease.lua: give a taken permit a new lease.
-- RedissonPermitExpirableSemaphore.updateLeaseTimeAsync, step for step
-- (keys: see permitlib.lua).
--
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
-- id       ARGV[2]: the permit id, 16 raw bytes
-- lease    ARGV[3]: the new lease in ms from now, 0 for none
--
-- Reply: 1 when the permit is taken and its lease now ends lease ms from
-- now; 0 when it is not taken (or was reclaimed by this call).

local pub, id, lease = ARGV[1], ARGV[2], ARGV[3]

local t = nowMs()
reclaim(t, -1, pub)
if redis.call('zscore', taken, id) == false then
	return 0
end
redis.call('zadd', taken, expiry(t, lease), id)
return 1
