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
-- KEYS[5]  relock's grants, HASH relock_grants:{N} (relock's own; Redisson
--          neither reads nor writes it): a relock waiter that takes the
--          lock straight from a release (see handOff) -> "<by>:<turn>", the
--          time (ms) its grant must end by and its turn; "0" once granted,
--          until it claims the grant with an attempt or gives it back.

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
		redis.call('hdel', KEYS[5], head)
		dropped = dropped + 1
	end
end

-- grant gives owner the free lock, in Redisson's order: owner leaves the
-- head of the queue, every remaining deadline moves wait ms earlier (the
-- turn just taken is no longer ahead of them), and the hash gets one hold.
local function grant(owner, lease, wait)
	redis.call('lpop', KEYS[2])
	redis.call('zrem', KEYS[3], owner)
	redis.call('hdel', KEYS[5], owner)
	for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
		redis.call('zincrby', KEYS[3], -wait, waiter)
	end
	redis.call('hset', KEYS[1], owner, 1)
	redis.call('pexpire', KEYS[1], lease)
end

-- keepGrants keeps the grants' hash alive for ttl ms at least.
local function keepGrants(ttl)
	if redis.call('pttl', KEYS[5]) < ttl then
		redis.call('pexpire', KEYS[5], ttl)
	end
end

-- takesGrants records that owner, queued now, takes a grant (see handOff)
-- by the time t + ttl ms: the lease its attempt at t asked for runs out
-- then. The waiter's own clock counts that lease from before its attempt
-- was sent, so no grant outlives the hold the waiter believes it has.
local function takesGrants(owner, ttl, turn, t)
	redis.call('hset', KEYS[5], owner, (t + ttl) .. ':' .. turn)
	keepGrants(ttl)
end

-- handOff hands the free lock on to the head of the queue, if any. A head
-- that takes grants (see takesGrants), whose grant would not end at once,
-- and that hears "2" on its channel, is given the lock in this script:
-- it leaves the queue as if it had taken the lock itself, with the lease
-- left of its last attempt's, and its grant is marked "0"; its wait ends on
-- the message, with no attempt. A head that takes no grants (a Java
-- waiter, or one that keeps an owner of the caller's) is told "0" instead,
-- and tries, as Redisson's waiters do. Nobody hearing "2" means the head
-- is not listening yet (its attempt that subscribes comes next) or is
-- gone: the lock stays free for its attempt, and its turn for its
-- deadline.
local function handOff(publish, message)
	if publish == '' then
		return
	end
	local head = redis.call('lindex', KEYS[2], 0)
	if head == false then
		return
	end
	local channel = KEYS[4] .. ':' .. head
	local by, turn = string.match(redis.call('hget', KEYS[5], head) or '', '^(%d+):(%d+)$')
	local lease = by and tonumber(by) - now()
	if not lease or lease <= 0 then
		redis.call(publish, channel, message)
	elseif redis.call(publish, channel, '2') > 0 then
		grant(head, lease, tonumber(turn))
		redis.call('hset', KEYS[5], head, '0')
		keepGrants(lease)
	end
end

-- claim ends the wait of owner, which takes grants, if a release granted
-- it the lock while it was not listening or its message was lost: the
-- grant is its hold, now with a lease of lease ms. It reports whether
-- there was one. A grant whose lease ran out is forgotten.
local function claim(owner, lease)
	if redis.call('hget', KEYS[5], owner) ~= '0' then
		return false
	end
	redis.call('hdel', KEYS[5], owner)
	if redis.call('hexists', KEYS[1], owner) == 0 then
		return false
	end
	redis.call('pexpire', KEYS[1], lease)
	return true
end
