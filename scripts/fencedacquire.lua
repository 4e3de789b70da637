-- fencedacquire.lua: take a fenced lock (Redisson's RFencedLock), or take it
-- again as its owner, and draw a fencing token.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the token counter, redisson_lock_token:{N}
-- KEYS[3]  the waiters' set, relock_waiters:{N}; only with ARGV[4]
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  the counter's TTL in milliseconds after this draw; -1: none
--          (PERSIST), as Redisson keeps it, for names Java shares
-- ARGV[4..6]  directed wakes, as acquire.lua's ARGV[3..5]
--
-- Reply: {1, token} when the owner now holds the lock. The token is the
-- counter after INCR, raised to the server's clock in microseconds if that is
-- larger, and stored back: every successful acquire, re-entry included, gets
-- a larger token than any before it, even after Redis lost the counter (a
-- restart without persistence, a failover that missed it), when a plain INCR
-- would start again at 1 and a fencing store would refuse every new holder.
-- Redisson's acquire, a plain INCR of the same counter, stays compatible.
-- The same floor lets the counter expire (ARGV[3]) with no token going back:
-- a counter made again a day later starts at the clock, past every token
-- drawn a day before.
-- {0, pttl} when another owner holds it, pttl as in acquire.lua. A key of
-- another type fails with WRONGTYPE.
local pttl = redis.call('pttl', KEYS[1])
if pttl == -2 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	local token = redis.call('incr', KEYS[2])
	-- Built as a string (see nowMicros): Lua numbers above 2^53 or in
	-- exponent form would lose digits on the way back to Redis.
	local _, _, nowMicros = clockLib()
	local floor = nowMicros()
	if token < tonumber(floor) then
		redis.call('set', KEYS[2], floor)
		token = tonumber(floor)
	end
	if ARGV[3] == '-1' then
		redis.call('persist', KEYS[2])
	else
		redis.call('pexpire', KEYS[2], ARGV[3])
	end
	if ARGV[4] and ARGV[5] ~= '0' then
		wakeLib().settle(KEYS[3], ARGV[4], ARGV[5], ARGV[6])
	end
	return {1, token}
end
if ARGV[4] and ARGV[6] ~= '0' then
	wakeLib().register(KEYS[3], ARGV[4], ARGV[6])
end
return {0, pttl}
