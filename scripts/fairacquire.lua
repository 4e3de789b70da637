-- fairacquire.lua: take a fair lock (Redisson's RFairLock) in queue order,
-- take it again as its owner, or queue up.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' queue, LIST redisson_lock_queue:{N}
-- KEYS[3]  the waiters' deadlines, ZSET redisson_lock_timeout:{N}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  wait timeout in milliseconds: a waiter that has not tried again
--          within it is taken for dead and skipped
--
-- Deadlines are server time (TIME), so Go clients' clocks do not matter.
-- Waiters at the head of the queue whose deadline has passed are dropped
-- first. The lock is granted when it is free and the queue is empty or
-- starts with this owner. Otherwise the owner is queued, or its deadline
-- refreshed if it already is. The queue and deadline keys expire a wait
-- timeout after their last change, so a queue of dead waiters cannot outlive
-- them.
-- Reply: nil when granted (count up, TTL = lease); otherwise how long to wait
-- at most before trying again, in milliseconds: the lock's PTTL, or the time
-- until the head waiter's deadline when the lock is free but not our turn.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = tonumber(ARGV[3])
while true do
	local head = redis.call('lindex', KEYS[2], 0)
	if head == false then
		break
	end
	local deadline = tonumber(redis.call('zscore', KEYS[3], head))
	if deadline ~= nil and deadline > now then
		break
	end
	redis.call('lpop', KEYS[2])
	redis.call('zrem', KEYS[3], head)
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (head == false or head == ARGV[2]) then
	if head ~= false then
		redis.call('lpop', KEYS[2])
		redis.call('zrem', KEYS[3], ARGV[2])
	end
	redis.call('hset', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return nil
end
if redis.call('zadd', KEYS[3], now + wait, ARGV[2]) == 1 then
	redis.call('rpush', KEYS[2], ARGV[2])
end
redis.call('pexpire', KEYS[2], wait)
redis.call('pexpire', KEYS[3], wait)
local pttl = redis.call('pttl', KEYS[1])
if pttl >= 0 then
	return pttl
end
if pttl == -1 then
	return -1
end
-- Free, but another waiter's turn: at most until its deadline.
local first = tonumber(redis.call('zscore', KEYS[3], redis.call('lindex', KEYS[2], 0)))
if first == nil then
	return 0
end
return math.max(first - now, 0)
