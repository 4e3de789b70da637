-- fairrelease.lua: give back one hold of a fair lock; the last one hands
-- the lock on to the head of the queue only, on its own channel (see
-- handOff in fairlib.lua). It makes the same changes as Redisson 4.7's
-- RedissonFairLock.unlockInnerAsync, and one more: a relock head may be
-- given the lock here.
--
-- KEYS[1..5]  as in fairlib.lua
-- KEYS[6]  the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- ARGV[1]  the message published ("0")
-- ARGV[2]  lease in milliseconds, restored while holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[5]  latch TTL in milliseconds
-- ARGV[6]  "1" when this request may have been sent before, so that its
--          latch may hold its reply; "0" for a first send, which skips it
-- ARGV[7]  "1" when the caller believes it has the hold (see
--          Release.Believed): a release that frees the lock writes no latch
--
-- Reply: 1 when that was the last hold (the hash is deleted, or given to
-- the head waiter, after expired ones are dropped); 0 when holds remain;
-- nil when the owner held nothing, and nothing changes. A lock already gone
-- (it expired) still tells the head, as Redisson does, so that it need not
-- wait out its timer; Redisson then replies 1, relock nil (not held).
-- The latch remembers the reply of this request id, so a retried release
-- returns its first reply instead of releasing a second time. With ARGV[7]
-- a release that frees the lock writes none: a retry then finds no hold
-- and answers nil, as for a hold lost meanwhile (see Release.Believed).
if ARGV[6] == '1' then
	local earlier = redis.call('get', KEYS[6])
	if earlier then
		return tonumber(earlier)
	end
end
dropExpired(nowMs())
-- The mark of a grant the owner took (see handOff) has served: the owner
-- is giving back a hold it has, or that it lost.
redis.call('hdel', KEYS[5], ARGV[3])
if redis.call('exists', KEYS[1]) == 0 then
	handOff(ARGV[4], ARGV[1])
	return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
	return nil
end
local reply = 0
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[2])
else
	redis.call('del', KEYS[1])
	handOff(ARGV[4], ARGV[1])
	if ARGV[7] == '1' then
		return 1
	end
	reply = 1
end
redis.call('set', KEYS[6], reply, 'px', ARGV[5])
return reply
