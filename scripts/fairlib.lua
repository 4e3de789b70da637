-- fairlib.lua: shared by every fair-lock script; it is prepended to each
-- body and only defines functions. Each script using them has the fair
-- lock's keys in the same places:
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the waiters' queue, LIST redisson_lock_queue:{N}
-- KEYS[3]  the waiters' deadlines, ZSET redisson_lock_timeout:{N}, owner ->
--          the time (ms) by which it must have taken its turn
-- KEYS[4]  the channel prefix redisson_lock__channel:{N}; a waiter listens
--          on KEYS[4]:<owner>

-- now returns Redis's clock in milliseconds. Redisson passes its JVM's
-- clock instead; see docs/migrating-from-redisson.md for what that asks of
-- mixed deployments.
local function now()
	local t = redis.call('time')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- dropExpired pops waiters off the head of the queue while their deadline
-- has passed, touching no other deadline, as every script of Redisson's
-- fair lock does first (the "remove stale threads" loop). A head with no
-- deadline stops it, as in Redisson. It returns how many it dropped.
local function dropExpired(t)
	local dropped = 0
	while true do
		local head = redis.call('lindex', KEYS[2], 0)
		if head == false then
			return dropped
		end
		local deadline = redis.call('zscore', KEYS[3], head)
		if deadline == false or tonumber(deadline) > t then
			return dropped
		end
		redis.call('zrem', KEYS[3], head)
		redis.call('lpop', KEYS[2])
		dropped = dropped + 1
	end
end

-- grant gives owner the free lock, in Redisson's order: owner leaves the
-- head of the queue, every remaining deadline moves wait ms earlier (the
-- turn just taken is no longer ahead of them), and the hash gets one hold.
local function grant(owner, lease, wait)
	redis.call('lpop', KEYS[2])
	redis.call('zrem', KEYS[3], owner)
	for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
		redis.call('zincrby', KEYS[3], -wait, waiter)
	end
	redis.call('hset', KEYS[1], owner, 1)
	redis.call('pexpire', KEYS[1], lease)
end

-- wakeHead publishes message on the channel of the waiter at the head of
-- the queue, if any: only that waiter's turn has come.
local function wakeHead(publish, message)
	local head = redis.call('lindex', KEYS[2], 0)
	if head ~= false then
		if publish ~= '' then redis.call(publish, KEYS[4] .. ':' .. head, message) end
	end
end

