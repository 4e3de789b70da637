-- priorityrelease.lua: give back one hold of a priority lock; the last one
-- hands the lock on to the best-placed waiter (see handOff in
-- prioritylib.lua). Needs prioritylib.lua.
--
-- lock  lock, recordsKey  recordsKey, and KEYS[2], KEYS[4]: as in prioritylib.lua
-- latch       KEYS[5]: the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- message     ARGV[1]: the message published ("0")
-- lease       ARGV[2]: lease in milliseconds, restored while holds remain
-- owner       ARGV[3]: owner field
-- pub         ARGV[4]: publish command: "publish", "spublish", or "" to announce nothing
-- latchTTL    ARGV[5]: latch TTL in milliseconds
-- again       ARGV[6]: "1" when this request may have been sent before, so that its
--          latch may hold its reply; "0" for a first send, which skips it
-- believed    ARGV[7]: "1" when the caller believes it has the hold (see
--          Release.Believed): a release that frees the lock writes no latch
--
-- Reply: 1 when that was the last hold (the hash is deleted, or given to
-- the best-placed waiter); 0 when holds remain; nil when the owner held
-- nothing, and nothing changes but that a lock already gone (it expired)
-- is handed on. The latch remembers the reply of this request id, as in
-- fairrelease.lua.

local latch = KEYS[5]
local message, lease, owner, pub, latchTTL, again = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local believed = ARGV[7]

local earlier = latchedReply(latch, again)
if earlier then
	return earlier
end
local t = nowMs()
dropDead(t)
-- The mark of a grant the owner took has served.
if redis.call('hget', recordsKey, owner) == '0' then
	redis.call('hdel', recordsKey, owner)
end
if redis.call('exists', lock) == 0 then
	handOff(pub, message, t)
	return nil
end
local reply = giveBackHold(lock, owner, lease, function() handOff(pub, message, t) end)
if reply == nil or (reply == 1 and believed == '1') then
	return reply
end
latchReply(latch, reply, latchTTL)
return reply
