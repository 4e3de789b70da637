-- acquire.lua: take a reentrant lock, or take it again as its owner.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' set, relock_waiters:{N} (see wakelib.lua); only
--          with ARGV[3]
-- ARGV[1]  lease in milliseconds (the TTL the hash gets)
-- ARGV[2]  owner field, "<client-id>:<n>"
-- ARGV[3]  the client's id when it takes directed wakes, else absent
-- ARGV[4]  on success, what becomes of its registration (see settle)
-- ARGV[5]  on failure, register for this many milliseconds ("0": do not,
--          the caller will not wait); on success, how long a client that
--          settle puts back keeps the set alive
-- KEYS[3]  for a plain lock's waiter that offers, or drops its client, the
--          offers' hash relock_grants:{N} (see handOn in wakelib.lua); a
--          success that drops the client drops its offer too
-- ARGV[6]  with KEYS[3], the owner number n of the client's offer, or "0":
--          a failed attempt that registers offers it, for the lease ARGV[1]
--          (the offers' hash lives as long as the registration)
-- ARGV[7]  with KEYS[3] and settle "1", how many ms at least the client will
--          still listen on Redisson's channel once it leaves (see leave)
--
-- Reply: nil when the owner now holds the lock (its count went up by one and
-- the hash's TTL is the lease); -3 when, with an offer, the lock is held by
-- owner "<client>:<n>": a release gave it to the client, whose message has
-- not come, or was lost, and the caller takes it as is; otherwise the
-- hash's PTTL in milliseconds (-1 when it has no expiry), which bounds how
-- long the caller waits before trying again. A key of another type fails
-- with WRONGTYPE and is not changed.
--
-- PTTL first (-2: no key) saves a call on the commonest path, a free lock.
-- A lock held needs HEXISTS even for an owner made for the call, which
-- cannot hold it: it is the check that fails a key of another type.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	if ARGV[3] and ARGV[4] ~= '0' then
		wakeLib().settle(KEYS[2], ARGV[3], ARGV[4], ARGV[5], KEYS[3], ARGV[7])
	end
	return nil
end
if ARGV[6] and ARGV[6] ~= '0' then
	if redis.call('hexists', KEYS[1], ARGV[3] .. ':' .. ARGV[6]) == 1 then
		return -3
	end
	if ARGV[5] ~= '0' then
		wakeLib().offer(KEYS[3], ARGV[3], ARGV[6], ARGV[1], ARGV[5])
	end
end
if ARGV[3] and ARGV[5] ~= '0' then
	wakeLib().register(KEYS[2], ARGV[3], ARGV[5])
end
return pttl
