-- priorityleave.lua: take a waiter that gives up out of a priority lock's
-- queue. If it was the best placed and the lock is free, the next is told
-- (or granted the lock) at once. A waiter that was granted the lock and
-- gives up before it took the grant gives it back: one hold less, and the
-- lock handed on when that was the last. Needs prioritylib.lua.
--
-- KEYS[1..4]  as in prioritylib.lua
-- ARGV[1]  the message published ("0")
-- ARGV[2]  owner field
-- ARGV[3]  publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when the owner was queued or granted, 0 when it was neither.
local t = nowMs()
local owner = ARGV[2]
local mark = redis.call('hget', KEYS[3], owner)
if mark then
	redis.call('hdel', KEYS[3], owner)
end
if mark == '0' and redis.call('hexists', KEYS[1], owner) == 1 then
	if redis.call('hincrby', KEYS[1], owner, -1) <= 0 then
		redis.call('del', KEYS[1])
		dropDead(t)
		handOff(ARGV[3], ARGV[1], t)
	end
	return 1
end
local wasHead = head() == owner
if redis.call('zrem', KEYS[2], owner) == 0 then
	return 0
end
if wasHead and redis.call('exists', KEYS[1]) == 0 then
	dropDead(t)
	if head() then
		handOff(ARGV[3], ARGV[1], t)
	end
end
return 1
