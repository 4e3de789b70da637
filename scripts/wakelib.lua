-- wakelib.lua: directed wakes, relock's own addition to a plain or fenced
-- lock (see docs/waiting.md). Relock clients that wait on lock N register
-- in the sorted set relock_waiters:{N} (member: the client's id, score: when
-- it first registered, on the server's clock), and each listens on its own
-- channel relock_wake:{N}:<client-id>. A release still publishes "0" on
-- Redisson's channel, for Java waiters, and tells one relock client more.
-- Prepended to the scripts that use it.

-- wakeNext tells the longest-registered relock client that the lock is
-- free: "0" on its channel, relock_wake:{N}:<client-id>, named after the
-- waiters' set relock_waiters:{N}. A client that nobody hears on (it
-- stopped waiting, or died) is dropped, and the next one is told, a few at
-- most: the rest are reached by their re-polls.
local function wakeNext(waiters, pub)
	local prefix = 'relock_wake' .. string.sub(waiters, 15) .. ':'
	for _ = 1, 8 do
		local head = redis.call('zrange', waiters, 0, 0)[1]
		if head == nil then
			return
		end
		if redis.call(pub, prefix .. head, '0') > 0 then
			return
		end
		redis.call('zrem', waiters, head)
	end
end

-- register puts client in the waiters' set, at its end if it is not there
-- yet, and keeps the set alive for ttl ms more: every waiting client tries
-- again well within that.
local function register(waiters, client, ttl)
	local t = redis.call('time')
	redis.call('zadd', waiters, 'NX', t[1] * 1000 + math.floor(t[2] / 1000), client)
	redis.call('pexpire', waiters, ttl)
end

-- settle updates client's registration after it took the lock: "1" drops
-- it, "2" puts it at the end (it has other waiters), "0" leaves it. A
-- client put back after it was dropped (by a wake it could not hear yet:
-- see pubsub.Waiter.Recheck) keeps the set alive for ttl ms, as register.
local function settle(waiters, client, how, ttl)
	if how == '1' then
		redis.call('zrem', waiters, client)
	elseif how == '2' then
		local t = redis.call('time')
		if redis.call('zadd', waiters, t[1] * 1000 + math.floor(t[2] / 1000), client) == 1 and ttl ~= '0' then
			redis.call('pexpire', waiters, ttl)
		end
	end
end
