-- fairleave.lua: take a waiter that gives up out of a fair lock's queue.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' queue, redisson_lock_queue:{N}
-- KEYS[3]  the waiters' deadlines, redisson_lock_timeout:{N}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{N}
-- ARGV[1]  the message published ("0")
-- ARGV[2]  owner field
-- ARGV[3]  publish command: "publish" or "spublish"
--
-- If the waiter was at the head and the lock is free, the new head is told,
-- so that it is not left waiting for a turn nobody will announce.
-- Reply: 1 when the owner was queued, 0 when it was not.
local wasHead = redis.call('lindex', KEYS[2], 0) == ARGV[2]
redis.call('zrem', KEYS[3], ARGV[2])
if redis.call('lrem', KEYS[2], 0, ARGV[2]) == 0 then
	return 0
end
if wasHead and redis.call('exists', KEYS[1]) == 0 then
	local head = redis.call('lindex', KEYS[2], 0)
	if head ~= false then
		redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
	end
end
return 1
