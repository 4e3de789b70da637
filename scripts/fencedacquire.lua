-- fencedacquire.lua: take a fenced lock (Redisson's RFencedLock), or take it
-- again as its owner, and draw a fencing token.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the token counter, redisson_lock_token:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
--
-- Reply: {1, token} when the owner now holds the lock; the token is the
-- counter after INCR, so every successful acquire, re-entry included, gets a
-- larger one than any before it. {0, pttl} when another owner holds it, pttl
-- as in acquire.lua. A key of another type fails with WRONGTYPE.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
