-- fairlib.lua: shared by every fair-lock script; it is prepended to each
-- body and only defines functions. Each script using them has the fair
-- lock's keys in the same places:
--
-- lock           KEYS[1]: the lock hash N
-- queueKey       KEYS[2]: the waiters' queue, LIST redisson_lock_queue:{N}
-- deadlinesKey   KEYS[3]: the waiters' deadlines, ZSET redisson_lock_timeout:{N}, owner ->
--          the time (ms) by which it must have taken its turn
-- channelPrefix  KEYS[4]: the channel prefix redisson_lock__channel:{N}; a waiter listens
--          on channelPrefix:<owner>
-- grantsKey      KEYS[5]: relock's grants, HASH relock_grants:{N} (relock's own; Redisson
--          neither reads nor writes it): a relock waiter that takes the
--          lock straight from a release (see handOff) ->
--          "<by>:<lease>:<turn>:<try>": the time (ms) the lease its last
--          attempt asked for ends, that lease, its turn, and the number of
--          that attempt; "0" once granted, until its release, an attempt
--          that takes the grant, or its giving up.

local lock, queueKey, deadlinesKey, channelPrefix, grantsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local nowMs, nowSubMs, nowMicros = clockLib()

-- dropExpired pops waiters off the head of the queue while their deadline
-- has passed, touching no other deadline, as every script of Redisson's
-- fair lock does first (the "remove stale threads" loop). A head with no
-- deadline stops it, as in Redisson. It returns how many it dropped.
local function dropExpired(t)
	local dropped = 0
	while true do
		local head = redis.call('lindex', queueKey, 0)
		if head == false then
			return dropped
		end
		local deadline = redis.call('zscore', deadlinesKey, head)
		if deadline == false or tonumber(deadline) > t then
			return dropped
		end
		redis.call('zrem', deadlinesKey, head)
		redis.call('lpop', queueKey)
		redis.call('hdel', grantsKey, head)
		dropped = dropped + 1
	end
end

-- grant gives owner the free lock, in Redisson's order: owner leaves the
-- head of the queue, every remaining deadline moves wait ms earlier (the
-- turn just taken is no longer ahead of them), and the hash gets one hold.
local function grant(owner, lease, wait)
	redis.call('lpop', queueKey)
	redis.call('zrem', deadlinesKey, owner)
	for _, waiter in ipairs(redis.call('zrange', deadlinesKey, 0, -1)) do
		redis.call('zincrby', deadlinesKey, -wait, waiter)
	end
	redis.call('hset', lock, owner, 1)
	redis.call('pexpire', lock, lease)
end

-- keepGrants keeps the grants' hash alive for ttl ms at least.
local function keepGrants(ttl)
	if redis.call('pttl', grantsKey) < ttl then
		redis.call('pexpire', grantsKey, ttl)
	end
end

-- takesGrants records that owner, queued now by its attempt number try at
-- t with lease ttl ms, takes a grant (see handOff).
local function takesGrants(owner, ttl, turn, try, t)
	redis.call('hset', grantsKey, owner, (t + ttl) .. ':' .. ttl .. ':' .. turn .. ':' .. try)
	keepGrants(ttl)
end

-- handOff hands the free lock on to the head of the queue, if any. A head
-- that takes grants (see takesGrants), and whose last attempt was made
-- within its lease (it is most likely alive), is given the lock in this
-- script: it leaves the queue as if it had taken the lock itself, its
-- grant is marked "0", and it is told "2:<try>" on its channel, naming the
-- attempt the grant answers: its wait ends on the message, with no
-- attempt. The lock's TTL runs to the end of the lease its last attempt
-- asked for: its own clock counts that lease from before the attempt was
-- sent, so it never believes in more than Redis keeps (a head that takes
-- the grant late has its hold confirmed by the watchdog first); and a head
-- that takes the lock and then stalls holds it no longer than if it had
-- taken it with that attempt. (Not to the end of its turn, which may be
-- minutes away: a grantee paused before its first renewal would hold the
-- lock that long.)
--
-- The message goes out only with a grant, so a waiter can trust it
-- whoever counts the subscribers. A head that does not hear it (it
-- subscribes after its attempt, or its message was lost) takes the grant
-- with its next attempt. A head that takes no grants (a Java waiter, one
-- that keeps an owner of the caller's or a fixed lease), or whose last
-- attempt is older than its lease, is told message ("0"), and tries, as
-- Redisson's waiters do.
local function handOff(publish, message)
	if publish == '' then
		return
	end
	local head = redis.call('lindex', queueKey, 0)
	if head == false then
		return
	end
	local channel = channelPrefix .. ':' .. head
	local by, ttl, turn, try = string.match(redis.call('hget', grantsKey, head) or '', '^(%d+):(%d+):(%d+):(%d+)$')
	local t = nowMs()
	if not by or tonumber(by) <= t then
		redis.call(publish, channel, message)
		return
	end
	local lease = tonumber(by) - t
	redis.call(publish, channel, '2:' .. try)
	grant(head, lease, tonumber(turn))
	redis.call('hset', grantsKey, head, '0')
	keepGrants(lease)
end

-- claim ends the wait of owner, which takes grants, if it holds the lock
-- already: a release granted it the lock while it was not listening or
-- its message was lost, or an attempt of its own whose reply was lost took
-- it (the owner is made for one call, so no other hold of it can be here).
-- That hold is the call's one hold, now with a lease of lease ms. It
-- reports whether there was one. A grant that ran out before it was taken
-- (its holder's turn was over) or whose lock was deleted is forgotten, and
-- the waiter queues again at the end, as one whose turn ran out while it
-- was at the head (the commands HEXISTS N owner then HDEL of the grant say
-- so).
local function claim(owner, lease)
	local granted = redis.call('hget', grantsKey, owner) == '0'
	if redis.call('hexists', lock, owner) == 0 then
		if granted then
			redis.call('hdel', grantsKey, owner)
		end
		return false
	end
	redis.call('pexpire', lock, lease)
	if granted then
		redis.call('hdel', grantsKey, owner)
	end
	return true
end
