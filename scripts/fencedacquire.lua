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
-- clock       ARGV[4]: the client's clock in microseconds, a floor of the token
--          beside the server's (tokenlib.lua's draw)
-- client, settle, register  ARGV[5..7]: directed wakes, as in acquire.lua
--
-- Reply: {1, token} when the owner now holds the lock, the token drawn as
-- tokenlib.lua's draw does. Its clock floors let the counter expire
-- (counterTTL) with no token going back: a counter made again a day later
-- starts at the clock, past every token drawn a day before.
-- {0, pttl} when another owner holds it, pttl as in acquire.lua. A key of
-- another type, or a counter that is not an integer, fails with WRONGTYPE
-- before anything changes.

local lock, counter, waiters = KEYS[1], KEYS[2], KEYS[3]
local lease, owner, counterTTL, clock, client, settle, register = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

local pttl = redis.call('pttl', lock)
if pttl == -2 or redis.call('hexists', lock, owner) == 1 then
	local refused, draw = tokenLib()
	local bad = refused(counter)
	if bad then
		return bad
	end
	redis.call('hincrby', lock, owner, 1)
	redis.call('pexpire', lock, lease)
	local token = draw(counter, clock)
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
