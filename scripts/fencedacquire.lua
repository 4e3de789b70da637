-- fencedacquire.lua: take a fenced lock (Redisson's RFencedLock), or take it
-- again as its owner, and draw a fencing token.
--
-- lock        KEYS[1]: the lock hash N
-- counter     KEYS[2]: the token counter, redisson_lock_token:{N}
-- waiters     KEYS[3]: the waiters' set, relock_waiters:{N}; only with client
-- lease       ARGV[1]: lease in milliseconds
-- owner       ARGV[2]: owner field
-- counterTTL  ARGV[3]: the counter's TTL in milliseconds after this draw; -1: none
--          (PERSIST), as Redisson keeps it, for names Java shares
-- client, settle, register  ARGV[4..6]: directed wakes, as in acquire.lua
--
-- Reply: {1, token} when the owner now holds the lock. The token is the
-- counter after INCR, raised to the server's clock in microseconds if that is
-- larger, and stored back: every successful acquire, re-entry included, gets
-- a larger token than any before it, even after Redis lost the counter (a
-- restart without persistence, a failover that missed it), when a plain INCR
-- would start again at 1 and a fencing store would refuse every new holder.
-- Redisson's acquire, a plain INCR of the same counter, stays compatible.
-- The same floor lets the counter expire (counterTTL) with no token going back:
-- a counter made again a day later starts at the clock, past every token
-- drawn a day before.
-- {0, pttl} when another owner holds it, pttl as in acquire.lua. A key of
-- another type fails with WRONGTYPE.

local lock, counter, waiters = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, counterTTL, client, settle, register = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local pttl = redis.call('pttl', lock)
if pttl == -2 or redis.call('hexists', lock, owner) == 1 then
	redis.call('hincrby', lock, owner, 1)
	redis.call('pexpire', lock, lease)
	local token = redis.call('incr', counter)
	-- Built as a string (see nowMicros): Lua numbers above 2^53 or in
	-- exponent form would lose digits on the way back to Redis.
	local _, _, nowMicros = clockLib()
	local floor = nowMicros()
	if token < tonumber(floor) then
		redis.call('set', counter, floor)
		token = tonumber(floor)
	end
	if counterTTL == '-1' then
		redis.call('persist', counter)
	else
		redis.call('pexpire', counter, counterTTL)
	end
	if client and settle ~= '0' then
		wakeLib().settle(waiters, client, settle, register)
	end
	return {1, token}
end
if client and register ~= '0' then
	wakeLib().register(waiters, client, register)
end
return {0, pttl}
