-- acquire.lua: take a reentrant lock, or take it again as its owner.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' set, relock_waiters:{N} (see wakelib.lua); only
--          with ARGV[4]
-- ARGV[1]  lease in milliseconds (the TTL the hash gets)
-- ARGV[2]  owner field, "<client-id>:<n>"
-- ARGV[3]  "1" when the owner is new, made for this call, so it cannot hold
--          the lock already: the re-entry check is skipped
-- ARGV[4]  the client's id when it takes directed wakes, else absent
-- ARGV[5]  on success, what becomes of its registration (see settle)
-- ARGV[6]  on failure, register for this many milliseconds ("0": do not,
--          the caller will not wait); on success, how long a client that
--          settle puts back keeps the set alive
--
-- Reply: nil when the owner now holds the lock (its count went up by one and
-- the hash's TTL is the lease); otherwise the hash's PTTL in milliseconds
-- (-1 when it has no expiry), which bounds how long the caller waits before
-- trying again, and, with ARGV[4], as {PTTL, a holder's field}. A key of
-- another type fails with WRONGTYPE and is not changed.
--
-- PTTL first (-2: no key) saves a call on the path waiters take most, a lock
-- held by someone else: two calls instead of three.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 or (ARGV[3] ~= '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	if ARGV[4] then
		settle(KEYS[2], ARGV[4], ARGV[5], ARGV[6])
	end
	return nil
end
if not ARGV[4] then
	return pttl
end
if ARGV[6] ~= '0' then
	register(KEYS[2], ARGV[4], ARGV[6])
end
return {pttl, redis.call('hkeys', KEYS[1])[1] or ''}
