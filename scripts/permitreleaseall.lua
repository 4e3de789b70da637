-- permitreleaseall.lua: give back several permits by id, all or none.
-- RedissonPermitExpirableSemaphore.tryReleaseAsync(List), step for step
-- (keys: see permitlib.lua).
--
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[2..] the permit ids, 16 raw bytes each
--
-- Reply: how many were given back and published (the count, not the
-- total, as Redisson publishes here); 0 when any id is not taken or its
-- lease has ended, and then nothing is given back.

local pub = ARGV[1]

local t = nowMs()
for i = 2, #ARGV do
	local expire = redis.call('zscore', taken, ARGV[i])
	if expire == false or tonumber(expire) <= t then
		return 0
	end
end
reclaim(t, -1, pub)
local ids = {}
for i = 2, #ARGV do
	table.insert(ids, ARGV[i])
end
local removed = redis.call('zrem', taken, unpack(ids))
redis.call('incrby', sem, removed)
if pub ~= '' then redis.call(pub, channel, removed) end
return removed
