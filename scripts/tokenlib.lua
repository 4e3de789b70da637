-- tokenlib.lua: fencing tokens, for every script that draws one from a
-- token counter, redisson_lock_token:{N} (fencedacquire.lua,
-- leaserecord.lua). Needs clocklib.lua.
--
-- tokenLib() makes the functions:
--   refused(counter) an error reply when counter holds anything but an
--                    integer, else nil (a missing counter is fine). A
--                    script asks it before it changes anything, so that a
--                    counter overwritten with something else fails the
--                    script whole with WRONGTYPE, not halfway with INCR's
--                    error after the lock was taken;
--   draw(counter, atLeast)
--                    the next token: the counter after INCR, raised to the
--                    server's clock in microseconds and to atLeast (a
--                    string of digits, or nil), and stored back, if that is
--                    larger. So every draw, re-entries included, gets a
--                    larger token than any before it, even after Redis lost
--                    the counter (a restart without persistence, a failover
--                    that missed it), when a plain INCR would start again
--                    at 1 and a fencing store would refuse every new
--                    holder. The drawing client passes its own clock as
--                    atLeast, so that a lost counter under a server clock
--                    stepped back still starts past the tokens drawn before
--                    (a token steps back only when both clocks did).
--                    atLeast at or above 2^52 is ignored: a token must stay
--                    exact as a Lua number. Redisson's acquire, a plain
--                    INCR of the same counter, stays compatible.

local function tokenLib()
	local function refused(counter)
		local v = redis.pcall('get', counter)
		if type(v) == 'table' or v and not string.match(v, '^%-?%d+$') then
			return redis.error_reply('WRONGTYPE the token counter ' .. counter .. ' holds something other than an integer')
		end
		return nil
	end
	local function draw(counter, atLeast)
		local token = redis.call('incr', counter)
		-- Built as a string (see nowMicros): Lua numbers above 2^53 or in
		-- exponent form would lose digits on the way back to Redis.
		local _, _, nowMicros = clockLib()
		local floor = nowMicros()
		if atLeast and string.match(atLeast, '^%d+$') and string.len(atLeast) <= 16
			and tonumber(atLeast) < 4503599627370496 and tonumber(atLeast) > tonumber(floor) then
			floor = atLeast
		end
		if token < tonumber(floor) then
			redis.call('set', counter, floor)
			token = tonumber(floor)
		end
		return token
	end
	return refused, draw
end
