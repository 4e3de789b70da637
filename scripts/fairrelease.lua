-- fairrelease.lua: give back one hold of a fair lock; the last one wakes
-- the head of the queue only, on its own channel.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' queue, redisson_lock_queue:{N}
-- KEYS[3]  the waiters' deadlines, redisson_lock_timeout:{N}
-- KEYS[4]  the channel prefix, redisson_lock__channel:{N}; the head waiter
--          listens on KEYS[4]:<owner>
-- ARGV[1]  the message published ("0")
-- ARGV[2]  lease in milliseconds, restored while holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command: "publish" or "spublish"
--
-- Reply: 1 when that was the last hold (the hash is deleted and the head
-- waiter, after dropping dead ones, is told); 0 when holds remain; nil when
-- the owner held nothing (nothing changes).
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
	return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[2])
	return 0
end
redis.call('del', KEYS[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
	local head = redis.call('lindex', KEYS[2], 0)
	if head == false then
		return 1
	end
	local deadline = tonumber(redis.call('zscore', KEYS[3], head))
	if deadline ~= nil and deadline > now then
		redis.call(ARGV[4], KEYS[4] .. ':' .. head, ARGV[1])
		return 1
	end
	redis.call('lpop', KEYS[2])
	redis.call('zrem', KEYS[3], head)
end
