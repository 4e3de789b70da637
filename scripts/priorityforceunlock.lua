-- priorityforceunlock.lua: release a priority lock whoever holds it, and
-- hand it on to the best-placed waiter (see handOff in prioritylib.lua).
-- Needs prioritylib.lua.
--
-- KEYS[1..4]  as in prioritylib.lua
-- message        ARGV[1]: the message published ("0")
-- pub            ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when a lock was deleted (and handed on), 0 when there was none.
-- A key of another type is not a lock: it fails with WRONGTYPE before
-- anything changes.

local message, pub = ARGV[1], ARGV[2]

local kind = redis.call('type', lock)['ok']
if kind ~= 'none' and kind ~= 'hash' then
	return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local t = nowMs()
dropDead(t)
if redis.call('del', lock) == 1 then
	handOff(pub, message, t)
	return 1
end
return 0
