-- forceunlock.lua: release a lock whoever holds it.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock's channel (redisson_lock__channel:{N}, or
--          redisson_rwlock:{N} for a read-write lock)
-- ARGV[1]  the message published ("0"; "1" for a read-write lock)
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
-- KEYS[3]  with directed wakes, the waiters' set, as in release.lua, and
-- KEYS[4]  the offers' hash (see drop in wakelib.lua)
--
-- Reply: 1 when a lock was deleted (and ARGV[1] published), 0 when there was
-- none. A key of another type is not a lock: it fails with WRONGTYPE and is
-- left alone.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then
	return 0
end
if kind ~= 'hash' then
	return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
redis.call('del', KEYS[1])
if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
if KEYS[3] then
	wakeLib().wakeNext(KEYS[3], ARGV[2], KEYS[4])
end
return 1
