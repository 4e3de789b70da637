-- priorityforceunlock.lua: release a priority lock whoever holds it, and
-- hand it on to the best-placed waiter (see handOff in prioritylib.lua).
-- Needs prioritylib.lua.
--
-- KEYS[1..4]  as in prioritylib.lua
-- ARGV[1]  the message published ("0")
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when a lock was deleted (and handed on), 0 when there was none.
-- A key of another type is not a lock: it fails with WRONGTYPE before
-- anything changes.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
	return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
local t = nowMs()
dropDead(t)
if redis.call('del', KEYS[1]) == 1 then
	handOff(ARGV[2], ARGV[1], t)
	return 1
end
return 0
