-- fairrelease.lua: give back one hold of a fair lock; the last one hands
-- the lock on to the head of the queue only, on its own channel (see
-- handOff in fairlib.lua). It makes the same changes as Redisson 4.7's
-- RedissonFairLock.unlockInnerAsync, and one more: a relock head may be
-- given the lock here.
--
-- lock  lock, and KEYS[2..4]: as in fairlib.lua
-- grantsKey  grantsKey: as in fairlib.lua
-- latch      KEYS[6]: the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- message    ARGV[1]: the message published ("0")
-- lease      ARGV[2]: lease in milliseconds, restored while holds remain
-- owner      ARGV[3]: owner field
-- pub        ARGV[4]: publish command: "publish", "spublish", or "" to announce nothing
-- latchTTL   ARGV[5]: latch TTL in milliseconds
-- again      ARGV[6]: "1" when this request may have been sent before, so that its
--          latch may hold its reply; "0" for a first send, which skips it
-- believed   ARGV[7]: "1" when the caller believes it has the hold (see
--          Release.Believed): a release that frees the lock writes no latch
--
-- Reply: 1 when that was the last hold (the hash is deleted, or given to
-- the head waiter, after expired ones are dropped); 0 when holds remain;
-- nil when the owner held nothing, and nothing changes. A lock already gone
-- (it expired) still tells the head, as Redisson does, so that it need not
-- wait out its timer; Redisson then replies 1, relock nil (not held).
-- The latch remembers the reply of this request id, so a retried release
-- returns its first reply instead of releasing a second time. With believed
-- a release that frees the lock writes none: a retry then finds no hold
-- and answers nil, as for a hold lost meanwhile (see Release.Believed).

local latch = KEYS[6]
local message, lease, owner, pub, latchTTL, again = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local believed = ARGV[7]

local earlier = latchedReply(latch, again)
if earlier then
	return earlier
end
dropExpired(nowMs())
-- The mark of a grant the owner took (see handOff) has served: the owner
-- is giving back a hold it has, or that it lost.
redis.call('hdel', grantsKey, owner)
if redis.call('exists', lock) == 0 then
	handOff(pub, message)
	return nil
end
local reply = giveBackHold(lock, owner, lease, function() handOff(pub, message) end)
if reply == nil or (reply == 1 and believed == '1') then
	return reply
end
latchReply(latch, reply, latchTTL)
return reply
