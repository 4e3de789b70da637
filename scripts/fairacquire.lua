-- fairacquire.lua: take a fair lock (Redisson's RFairLock) in queue order,
-- take it again as its owner, or join the queue. It makes the same changes
-- as Redisson 4.7's RedissonFairLock.tryLockInnerAsync (the EVAL_LONG
-- script when join is "1", the EVAL_NULL_BOOLEAN one when "0"), so Java
-- and Go waiters share one queue. Needs fairlib.lua.
--
-- lock, queueKey, deadlinesKey  KEYS[1..3], and KEYS[4]: as in fairlib.lua
-- grantsKey  grantsKey: as in fairlib.lua
-- lease         ARGV[1]: lease in milliseconds
-- owner         ARGV[2]: owner field
-- wait          ARGV[3]: wait: Redisson's threadWaitTime, the turn each waiter is given
--          (the tryLock wait time when there is one), in milliseconds
-- join          ARGV[4]: "1" to join the queue when the lock cannot be taken, "0" to try
--          once and leave no trace (Redisson's tryLock())
-- pub           ARGV[5]: publish command: "publish", "spublish", or "" to announce nothing
-- message       ARGV[6]: the message that tells a waiter its turn has come ("0")
-- grantTry      ARGV[7]: "0", or, when the owner takes grants (relock's own, see handOff
--          in fairlib.lua), this attempt's number within its call (from 1):
--          it is recorded as taking grants while it waits, and from its
--          second attempt on it takes a hold it finds (see claim in
--          fairlib.lua). Only a waiter whose owner was made for this one
--          call may: any hold of that owner is this call's.
-- nonReentrant  ARGV[8]: "1" for a non-reentrant fair lock (RNonReentrantFairLock): an
--          owner that holds the lock already is refused with the error
--          RELOCK_REENTRY and nothing else changes (Redisson's
--          RedissonNonReentrantFairLock.tryLockInnerAsync replies the error
--          NON_REENTRANT_REACQUIRE at the same step); "0" takes it again
--
-- One step more than Redisson: when the lock is free but the turn is
-- another waiter's, that waiter is told (see handOff). A release
-- tells it; but when the lock became free with no release (its key
-- deleted or expired) or the head before it was dropped as expired,
-- nothing else would, and it may be backing off. A Java waiter takes it as
-- any wake-up and tries again.
--
-- Deadlines are chained: a new waiter's is the last waiter's plus wait, or,
-- with nobody queued, the lock's PTTL plus wait from now. A waiter already
-- queued keeps its deadline; every grant takes wait off every deadline.
--
-- Reply: nil when granted (count up, TTL = lease), or when an owner that
-- takes grants finds its hold (count 1, TTL = lease). Otherwise, as Redisson:
-- try once: 1. Joining: how long until the turn ahead of this one ends (the
-- last waiter's deadline, or the lock's PTTL; may be negative). Already
-- queued: the lock's PTTL, or 0 when it is free, which means another
-- waiter's turn (Redisson's Java waiters retry at once on it; relock backs
-- off).

local lease, owner, wait, join, pub, message = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local grantTry, nonReentrant = ARGV[7], ARGV[8]

local t = nowMs()
wait = tonumber(wait)
dropExpired(t)
local try = tonumber(grantTry)
local grants = try > 0
-- A first attempt has nothing to claim and no grant record to drop.
if try > 1 and claim(owner, lease) then
	return nil
end
local free = redis.call('exists', lock) == 0
if free and (redis.call('exists', queueKey) == 0 or redis.call('lindex', queueKey, 0) == owner) then
	grant(owner, lease, wait)
	if try > 1 then
		redis.call('hdel', grantsKey, owner)
	end
	return nil
end
if free then
	handOff(pub, message)
end
if redis.call('hexists', lock, owner) == 1 then
	if nonReentrant == '1' then
		return redis.error_reply('RELOCK_REENTRY this owner holds the non-reentrant lock already')
	end
	redis.call('hincrby', lock, owner, 1)
	redis.call('pexpire', lock, lease)
	return nil
end
if join ~= '1' then
	return 1
end
if redis.call('zscore', deadlinesKey, owner) ~= false then
	if grants then
		takesGrants(owner, tonumber(lease), wait, grantTry, t)
	end
	return math.max(0, redis.call('pttl', lock))
end
local last = redis.call('lindex', queueKey, -1)
local lastDeadline = last ~= false and last ~= owner and redis.call('zscore', deadlinesKey, last)
local ttl
if lastDeadline then
	ttl = tonumber(lastDeadline) - t
else
	ttl = redis.call('pttl', lock)
end
if redis.call('zadd', deadlinesKey, ttl + wait + t, owner) == 1 then
	redis.call('rpush', queueKey, owner)
end
if grants then
	takesGrants(owner, tonumber(lease), wait, grantTry, t)
end
return ttl
