-- forceunlock.lua: release a lock whoever holds it.
--
-- lock     KEYS[1]: the lock hash N
-- channel  KEYS[2]: the lock's channel (redisson_lock__channel:{N}, or
--          redisson_rwlock:{N} for a read-write lock)
-- message  ARGV[1]: the message published ("0"; "1" for a read-write lock)
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
-- waiters  KEYS[3]: with directed wakes, the waiters' set, as in release.lua, and
-- offers   KEYS[4]: the offers' hash (see drop in wakelib.lua)
--
-- Reply: 1 when a lock was deleted (and message published), 0 when there was
-- none. A key of another type is not a lock: it fails with WRONGTYPE and is
-- left alone.

local lock, channel, waiters, offers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, pub = ARGV[1], ARGV[2]

local kind = redis.call('type', lock)['ok']
if kind == 'none' then
	return 0
end
if kind ~= 'hash' then
	return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', lock)
if pub ~= '' then redis.call(pub, channel, message) end
if waiters then
	wakeLib().wakeNext(waiters, pub, offers)
end
return 1
