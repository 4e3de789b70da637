-- fairforceunlock.lua: release a fair lock whoever holds it, and hand it
-- on to the head of the queue (see handOff in fairlib.lua), as Redisson
-- 4.7's RedissonFairLock.forceUnlockAsync tells the head. Needs
-- fairlib.lua.
--
-- KEYS[1..5]  as in fairlib.lua
-- message        ARGV[1]: the message published ("0")
-- pub            ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when a lock was deleted (and handed on), 0 when there was none. A key of another type is not a lock: it fails with WRONGTYPE
-- before anything changes.

local message, pub = ARGV[1], ARGV[2]

local kind = redis.call('type', lock)['ok']
if kind ~= 'none' and kind ~= 'hash' then
	return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
dropExpired(nowMs())
if redis.call('del', lock) == 1 then
	handOff(pub, message)
	return 1
end
return 0
