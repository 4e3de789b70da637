-- acquire.lua: take a reentrant lock, or take it again as its owner.
--
-- KEYS[1]  the lock hash N
-- ARGV[1]  lease in milliseconds (the TTL the hash gets)
-- ARGV[2]  owner field, "<client-id>:<n>"
--
-- Reply: nil when the owner now holds the lock (its count went up by one and
-- the hash's TTL is the lease); otherwise the hash's PTTL in milliseconds
-- (-1 when it has no expiry), which bounds how long the caller waits before
-- trying again. A key of another type fails with WRONGTYPE and is not changed.
--
-- PTTL first (-2: no key) saves a call on the path waiters take most, a lock
-- held by someone else: two calls instead of three.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return nil
end
return pttl
