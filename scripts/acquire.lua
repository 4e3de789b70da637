-- acquire.lua: take a reentrant lock, or take it again as its owner.
--
-- lock      KEYS[1], the lock hash N
-- lease     ARGV[1], ms: the TTL the hash gets
-- owner     ARGV[2], the owner field, "<client-id>:<n>"
-- client    ARGV[3], the client's id when it takes directed wakes, else
--           absent
-- waiters   KEYS[2], the waiters' set, relock_waiters:{N} (see
--           wakelib.lua); only with client
-- settle    ARGV[4], on success, what becomes of the client's
--           registration (see settle)
-- register  ARGV[5], on failure, register for this many ms ("0": do not,
--           the caller will not wait); on success, how long a client that
--           settle puts back keeps the set alive
-- offers    KEYS[3], for a plain lock's waiter that offers, or drops its
--           client, the offers' hash relock_grants:{N} (see handOn in
--           wakelib.lua); a success that drops the client drops its offer
--           too
-- offer     ARGV[6], with offers, the client's offer, "<n>:<last>" (owner
--           numbers n to last, see offer in wakelib.lua), or "0": a failed
--           attempt that registers offers it, for the lease (the offers'
--           hash lives as long as the registration)
-- listens   ARGV[7], with offers and settle "1", how many ms at least the
--           client will still listen on Redisson's channel once it leaves
--           (see leave)
--
-- Reply: nil when the owner now holds the lock (its count went up by one and
-- the hash's TTL is the lease); -3 when, with an offer, the lock is held by
-- owner "<client>:<n>", n the offer's first number: a release gave it to
-- the client, whose message has
-- not come, or was lost, and the caller takes it as is; otherwise the
-- hash's PTTL in milliseconds (-1 when it has no expiry), which bounds how
-- long the caller waits before trying again. A key of another type fails
-- with WRONGTYPE and is not changed.

local lock, waiters, offers = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, client, settle, register, offered, listens = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

-- PTTL first (-2: no key) saves a call on the commonest path, a free lock.
-- A lock held needs its owners read (HKEYS) even for an owner made for the
-- call, which cannot hold it: it is the read that fails a key of another
-- type. Both are read once per script (see readLock).
local pttl, owners = readLock(lock)
if pttl == -2 or owners[owner] then
	if abandoned() then
		return -4
	end
	wroteLock(lock)
	redis.call('hincrby', lock, owner, 1)
	redis.call('pexpire', lock, lease)
	if client and settle ~= '0' then
		wakeLib().settle(waiters, client, settle, register, offers, listens)
	end
	return nil
end
if offered and offered ~= '0' then
	if abandoned() then
		return -4
	end
	if owners[client .. ':' .. string.match(offered, '^%d+')] then
		return -3
	end
	if register ~= '0' then
		wakeLib().offer(offers, client, offered, lease, register)
	end
end
if client and register ~= '0' then
	wakeLib().register(waiters, client, register)
end
return pttl
