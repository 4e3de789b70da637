-- prioritylib.lua: shared by every priority-lock script (relock's own
-- kind; Redisson has none); it is prepended to each body and only defines
-- functions. Each script using them has the priority lock's keys in the
-- same places:
--
-- lock           KEYS[1]: the lock hash N, Redisson's RLock layout: owner -> holds
-- queueKey       KEYS[2]: the queue, ZSET relock_priority_queue:{N}: owner -> its place,
--          in microseconds of Redis's clock: its arrival moved earlier by
--          its priority times the aging (the lowest place is served first)
-- recordsKey     KEYS[3]: the waiters, HASH relock_priority_waiters:{N}: owner ->
--          "<alive>:<priority>:<arrival>:<by>:<try>": the time (ms) by
--          which it must have made another attempt or be taken for dead,
--          its priority, its arrival (µs), and, for a waiter that takes
--          grants (see handOff), the time (ms) the lease its last attempt
--          asked for ends and that attempt's number ("0:0" for one that
--          does not); "0" once granted, until its release, an attempt that
--          takes the grant, or its giving up
-- channelPrefix  KEYS[4]: the channel prefix redisson_lock__channel:{N}: Java RLock
--          waiters listen on it; a queued waiter on channelPrefix:<owner>

local lock, queueKey, recordsKey, channelPrefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]

local nowMs, nowSubMs, nowMicros = clockLib()

-- record parses owner's waiter record: alive, priority, arrival (the
-- string), by, try; nil for none or a grant's mark.
local function record(owner)
	local r = redis.call('hget', recordsKey, owner)
	if not r then
		return nil
	end
	local alive, priority, arrival, by, try = string.match(r, '^(%d+):(%d+):(%d+):(%d+):(%d+)$')
	if not alive then
		return nil
	end
	return tonumber(alive), priority, arrival, tonumber(by), try
end

-- head returns the owner at the head of the queue, or nil.
local function head()
	return redis.call('zrange', queueKey, 0, 0)[1]
end

-- dropDead takes waiters off the head of the queue while they are taken
-- for dead (no attempt within their alive window) or have no record.
local function dropDead(t)
	while true do
		local h = head()
		if not h then
			return
		end
		local alive = record(h)
		if alive and alive > t then
			return
		end
		redis.call('zrem', queueKey, h)
		redis.call('hdel', recordsKey, h)
	end
end

-- keep keeps the queue's keys alive for ttl ms at least: when every
-- waiter dies, they go.
local function keep(ttl)
	for i = 2, 3 do
		if redis.call('pttl', KEYS[i]) < ttl then
			redis.call('pexpire', KEYS[i], ttl)
		end
	end
end

-- grant gives owner the free lock with a lease of lease ms: it leaves the
-- queue and the hash gets one hold.
local function grant(owner, lease)
	redis.call('zrem', queueKey, owner)
	redis.call('hset', lock, owner, 1)
	redis.call('pexpire', lock, lease)
end

-- handOff hands the free lock on to the head of the queue: with nobody
-- queued, message goes out on the lock's channel, as Redisson's RLock
-- release publishes, for Java waiters. A head that takes grants and whose
-- last attempt's lease has not ended is given the lock (grantTo in
-- grantlib.lua); any other head is told message on its channel, and
-- tries.
local function handOff(publish, message, t)
	if publish == '' then
		return
	end
	local h = head()
	if not h then
		redis.call(publish, channelPrefix, message)
		return
	end
	local _, _, _, by, try = record(h)
	grantTo(publish, channelPrefix .. ':' .. h, h, by, try, t, message, grant, recordsKey)
end

-- claim is claimGrant (grantlib.lua) with the priority lock's records: a
-- waiter whose grant is gone queues again as a new arrival.
local function claim(owner, lease)
	return claimGrant(lock, recordsKey, owner, lease)
end
