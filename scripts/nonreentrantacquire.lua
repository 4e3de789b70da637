-- nonreentrantacquire.lua: take a non-reentrant lock (Redisson's
-- RNonReentrantLock): RLock's layout, at most one hold.
--
-- lock      KEYS[1]: the lock hash N
-- waiters   KEYS[2]: the waiters' set, relock_waiters:{N}; only with client
-- lease     ARGV[1]: lease in milliseconds
-- owner     ARGV[2]: owner field
-- client, settle, register  ARGV[3..5]: directed wakes, as in acquire.lua
--
-- Reply: nil when the owner now holds the lock (count 1, TTL the lease);
-- the error RELOCK_REENTRY when the owner holds it already, and nothing is
-- changed (Redisson's RedissonNonReentrantLock.tryLockInnerAsync refuses
-- the same, with the error NON_REENTRANT_REACQUIRE); otherwise the hash's
-- PTTL, as in acquire.lua. A key of another type fails with WRONGTYPE.

local lock, waiters = KEYS[1], KEYS[2]
local lease, owner, client, settle, register = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local pttl, owners = readLock(lock)
if pttl == -2 then
	if abandoned() then
		return -4
	end
	wroteLock(lock)
	redis.call('hincrby', lock, owner, 1)
	redis.call('pexpire', lock, lease)
	if client and settle ~= '0' then
		wakeLib().settle(waiters, client, settle, register)
	end
	return nil
end
if owners[owner] then
	return redis.error_reply('RELOCK_REENTRY this owner holds the non-reentrant lock already')
end
if client and register ~= '0' then
	wakeLib().register(waiters, client, register)
end
return pttl
