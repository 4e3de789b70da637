-- grouprelease.lua: give back one hold of each value of a group lock
-- (RedissonFasterMultiLock.unlockInnerAsync). See grouplib.lua.
--
-- group     KEYS[1]: the group's hash G
-- channel   KEYS[2]: the lock channel, redisson_lock__channel:{G}
-- latch     KEYS[3]: the unlock latch, redisson_unlock_latch:{G}:<request-id>
-- message   ARGV[1]: the message published on channel when a value becomes free:
--          "00", which Redisson's waiters read as 0 (Long.valueOf) and
--          relock's let pass: each value that became free is announced to
--          them with "0" on its own channel, relock_group:{G}:<f>, so that
--          a release wakes only waiters of what it freed
-- lease     ARGV[2]: lease in milliseconds, for the holds that remain
-- owner     ARGV[3]: owner
-- pub       ARGV[4]: publish command: "publish", "spublish", or "" for none
-- latchTTL  ARGV[5]: latch TTL in milliseconds
-- again     ARGV[6]: "1" when this request may have been sent before (read the latch)
-- believed  ARGV[7]: "1" when the caller believes it has the hold: a release that
--          frees every value then writes no latch (see release.lua)
-- ARGV[8..] the values' fields
--
-- Reply: 1 when owner's last hold of every value is given back (each is
-- free, and announced); 0 when holds of them remain (each ends no sooner
-- than now + lease; the values that became free are announced); nil when
-- owner does not hold every value, and then nothing changed (Redisson
-- gives back the values it does hold first, and publishes even when
-- nothing became free; Java waiters see no difference but fewer
-- wake-ups).

local group, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local message, lease, owner, pub, latchTTL, again = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local believed = ARGV[7]

local earlier = latchedReply(latch, again)
if earlier then
	return earlier
end
local g = group
lease = tonumber(lease)
local now = nowMs()
local ends = {}
for i = 8, #ARGV do
	ends[i] = heldUntil(g, ARGV[i], owner, now)
	if ends[i] == nil then
		return nil
	end
end
local all, any = 1, false
for i = 8, #ARGV do
	local f = ARGV[i]
	local ef, cf = expireField(f, owner), countField(f, owner)
	if redis.call('hincrby', g, cf, -1) <= 0 then
		redis.call('hdel', g, f, ef, cf)
		if pub ~= '' then
			redis.call(pub, valueChannel(channel, f), '0')
		end
		any = true
	else
		all = 0
		if ends[i] < now + lease then
			redis.call('hset', g, ef, now + lease)
		end
	end
end
if any and pub ~= '' then
	redis.call(pub, channel, message)
end
if all == 1 and believed == '1' then
	return 1
end
latchReply(latch, all, latchTTL)
if all == 0 then
	extend(g, lease)
end
return all
