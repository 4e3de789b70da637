-- fairleave.lua: take a waiter that gives up out of a fair lock's queue,
-- as Redisson 4.7's RedissonFairLock.acquireFailedAsync does: every waiter
-- behind it gets its deadline wait ms earlier (the turn it held in the
-- chain is gone), then it leaves the queue and the deadline set. Needs
-- fairlib.lua.
--
-- KEYS[1..5]  as in fairlib.lua
-- ARGV[1]  the message published ("0")
-- ARGV[2]  owner field
-- ARGV[3]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[4]  wait in milliseconds: the one the owner joined the queue with
--
-- One step more than Redisson: if the waiter was at the head and the lock
-- is free, the new head is told, so that it is not left waiting for a turn
-- nobody will announce. A Java waiter treats it as any wake-up: it tries
-- again, as its own loop would have.
-- A waiter that was granted the lock (see handOff) and gives up before it
-- took the grant gives it back: one hold less, and the lock handed on when
-- that was the last.
-- Reply: 1 when the owner was queued or granted, 0 when it was neither.
local mark = redis.call('hget', KEYS[5], ARGV[2])
if mark then
	redis.call('hdel', KEYS[5], ARGV[2])
end
if mark == '0' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	if redis.call('hincrby', KEYS[1], ARGV[2], -1) <= 0 then
		redis.call('del', KEYS[1])
		handOff(ARGV[3], ARGV[1])
	end
	return 1
end
local queue = redis.call('lrange', KEYS[2], 0, -1)
local i = 1
while i <= #queue and queue[i] ~= ARGV[2] do
	i = i + 1
end
for j = i + 1, #queue do
	redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), queue[j])
end
redis.call('zrem', KEYS[3], ARGV[2])
redis.call('lrem', KEYS[2], 0, ARGV[2])
if i > #queue then
	return 0
end
if i == 1 and redis.call('exists', KEYS[1]) == 0 then
	handOff(ARGV[3], ARGV[1])
end
return 1
