-- clocklib.lua: the server's clock, for every script that needs it. It is
-- read once per script, on first use: the microseconds a script runs for
-- matter to nothing it computes, and Redis counts a script's expiries from
-- its start too. Redisson's scripts take the JVM's clock as an argument
-- instead; see docs/wire-format.md for what that asks of mixed deployments.
--
-- clockLib() makes the functions, so that a script whose common path needs
-- no clock (an uncontended acquire) pays for one closure, not three:
--   nowMs()     the clock in whole milliseconds;
--   nowSubMs()  the microseconds it is past nowMs, 0-999;
--   nowMicros() the clock in microseconds, as a string: its 16 digits are
--               more than Lua's number-to-text conversion keeps.

local clockSeconds, clockMicros

local function clockLib()
	local function read()
		if not clockSeconds then
			local t = redis.call('time')
			clockSeconds, clockMicros = tonumber(t[1]), tonumber(t[2])
		end
	end
	local function nowMs()
		read()
		return clockSeconds * 1000 + math.floor(clockMicros / 1000)
	end
	local function nowSubMs()
		read()
		return clockMicros % 1000
	end
	local function nowMicros()
		read()
		return string.format('%d%06d', clockSeconds, clockMicros)
	end
	return nowMs, nowSubMs, nowMicros
end

