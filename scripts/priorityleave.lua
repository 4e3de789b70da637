-- priorityleave.lua: take a waiter that gives up out of a priority lock's
-- queue. If it was the best placed and the lock is free, the next is told
-- (or granted the lock) at once. A waiter that was granted the lock and
-- gives up before it took the grant gives it back: one hold less, and the
-- lock handed on when that was the last. Needs prioritylib.lua.
--
-- KEYS[1..4]  as in prioritylib.lua
-- message        ARGV[1]: the message published ("0")
-- owner          ARGV[2]: owner field
-- pub            ARGV[3]: publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when the owner was queued or granted, 0 when it was neither.

local message, owner, pub = ARGV[1], ARGV[2], ARGV[3]

local t = nowMs()
local mark = redis.call('hget', recordsKey, owner)
if mark then
	redis.call('hdel', recordsKey, owner)
end
if mark == '0' and redis.call('hexists', lock, owner) == 1 then
	if redis.call('hincrby', lock, owner, -1) <= 0 then
		redis.call('del', lock)
		dropDead(t)
		handOff(pub, message, t)
	end
	return 1
end
local wasHead = head() == owner
if redis.call('zrem', queueKey, owner) == 0 then
	return 0
end
if wasHead and redis.call('exists', lock) == 0 then
	dropDead(t)
	if head() then
		handOff(pub, message, t)
	end
end
return 1
