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

-- handOff hands the free lock on to the head of the queue, if any: a
-- head that takes grants (see takesGrants) and whose last attempt was made
-- within its lease is given the lock (grantTo in grantlib.lua): it leaves
-- the queue as if it had taken the lock itself, every deadline behind it
-- moves a turn earlier (see grant), and the grants' hash lives as long as
-- the grant. (The lock's TTL is not to the end of the head's turn, which
-- may be minutes away: a grantee paused before its first renewal would
-- hold the lock that long.) Any other head is told message ("0").
local function handOff(publish, message)
	if publish == '' then
		return
	end
	local head = redis.call('lindex', queueKey, 0)
	if head == false then
		return
	end
	local by, ttl, turn, try = string.match(redis.call('hget', grantsKey, head) or '', '^(%d+):(%d+):(%d+):(%d+)$')
	local give = function(owner, lease) grant(owner, lease, tonumber(turn)) end
	local lease = grantTo(publish, channelPrefix .. ':' .. head, head, by and tonumber(by), try, nowMs(), message, give, grantsKey)
	if lease then
		keepGrants(lease)
	end
end

-- claim is claimGrant (grantlib.lua) with the fair lock's grants: a grant
-- that ran out before it was taken (its holder's turn was over) is
-- forgotten, and the waiter queues again at the end, as one whose turn
-- ran out while it was at the head.
local function claim(owner, lease)
	return claimGrant(lock, grantsKey, owner, lease)
end
