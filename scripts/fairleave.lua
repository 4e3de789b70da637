-- fairleave.lua: take a waiter that gives up out of a fair lock's queue,
-- as Redisson 4.7's RedissonFairLock.acquireFailedAsync does: every waiter
-- behind it gets its deadline wait ms earlier (the turn it held in the
-- chain is gone), then it leaves the queue and the deadline set. Needs
-- fairlib.lua.
--
-- KEYS[1..4]  as in fairlib.lua
-- ARGV[1]  the message published ("0")
-- ARGV[2]  owner field
-- ARGV[3]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[4]  wait in milliseconds: the one the owner joined the queue with
--
-- One step more than Redisson: if the waiter was at the head and the lock
-- is free, the new head is told, so that it is not left waiting for a turn
-- nobody will announce. A Java waiter treats it as any wake-up: it tries
-- again, as its own loop would have.
-- Reply: 1 when the owner was queued, 0 when it was not.
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
	wakeHead(ARGV[3], ARGV[1])
end
return 1
