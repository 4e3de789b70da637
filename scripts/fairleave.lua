-- fairleave.lua: take a waiter that gives up out of a fair lock's queue,
-- as Redisson 4.7's RedissonFairLock.acquireFailedAsync does: every waiter
-- behind it gets its deadline wait ms earlier (the turn it held in the
-- chain is gone), then it leaves the queue and the deadline set. Needs
-- fairlib.lua.
--
-- lock, queueKey, deadlinesKey  KEYS[1..3], and KEYS[4]: as in fairlib.lua
-- grantsKey  grantsKey: as in fairlib.lua
-- message       ARGV[1]: the message published ("0")
-- owner         ARGV[2]: owner field
-- pub           ARGV[3]: publish command: "publish", "spublish", or "" to announce nothing
-- wait          ARGV[4]: wait in milliseconds: the one the owner joined the queue with
--
-- One step more than Redisson: if the waiter was at the head and the lock
-- is free, the new head is told, so that it is not left waiting for a turn
-- nobody will announce. A Java waiter treats it as any wake-up: it tries
-- again, as its own loop would have.
-- A waiter that was granted the lock (see handOff) and gives up before it
-- took the grant gives it back: one hold less, and the lock handed on when
-- that was the last.
-- Reply: 1 when the owner was queued or granted, 0 when it was neither.

local message, owner, pub, wait = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local mark = redis.call('hget', grantsKey, owner)
if mark then
	redis.call('hdel', grantsKey, owner)
end
if mark == '0' and redis.call('hexists', lock, owner) == 1 then
	if redis.call('hincrby', lock, owner, -1) <= 0 then
		redis.call('del', lock)
		handOff(pub, message)
	end
	return 1
end
local queue = redis.call('lrange', queueKey, 0, -1)
local i = 1
while i <= #queue and queue[i] ~= owner do
	i = i + 1
end
for j = i + 1, #queue do
	redis.call('zincrby', deadlinesKey, -tonumber(wait), queue[j])
end
redis.call('zrem', deadlinesKey, owner)
redis.call('lrem', queueKey, 0, owner)
if i > #queue then
	return 0
end
if i == 1 and redis.call('exists', lock) == 0 then
	handOff(pub, message)
end
return 1
