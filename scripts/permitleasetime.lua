-- permitleasetime.lua: how long a taken permit's lease has left.
-- RedissonPermitExpirableSemaphore.getLeaseTimeAsync, step for step (keys:
-- see permitlib.lua), but for its reply when the permit is not taken.
--
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
-- id       ARGV[2]: the permit id, 16 raw bytes
--
-- Reply: the ms left, -1 when the permit has no lease, nil when it is not
-- taken (Redisson replies 0, and its Java side throws).

local pub, id = ARGV[1], ARGV[2]

local t = nowMs()
reclaim(t, -1, pub)
local score = redis.call('zscore', taken, id)
if score == false then
	return false
end
if score == noLease then
	return -1
end
return tonumber(score) - t
