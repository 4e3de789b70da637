-- nonreentrantacquire.lua: take a non-reentrant lock (Redisson's
-- RNonReentrantLock): RLock's layout, at most one hold.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' set, relock_waiters:{N}; only with ARGV[3]
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3..5]  directed wakes, as in acquire.lua
--
-- Reply: nil when the owner now holds the lock (count 1, TTL the lease);
-- the error RELOCK_REENTRY when the owner holds it already, and nothing is
-- changed (Redisson's RedissonNonReentrantLock.tryLockInnerAsync refuses
-- the same, with the error NON_REENTRANT_REACQUIRE); otherwise the hash's
-- PTTL, as in acquire.lua. A key of another type fails with WRONGTYPE.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	if ARGV[3] and ARGV[4] ~= '0' then
		wakeLib().settle(KEYS[2], ARGV[3], ARGV[4], ARGV[5])
	end
	return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	return redis.error_reply('RELOCK_REENTRY this owner holds the non-reentrant lock already')
end
if ARGV[3] and ARGV[5] ~= '0' then
	wakeLib().register(KEYS[2], ARGV[3], ARGV[5])
end
return pttl
