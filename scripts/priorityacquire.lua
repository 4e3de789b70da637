-- priorityacquire.lua: take a priority lock (relock's own kind) when it is
-- free and the owner is the best-placed waiter, take it again as its
-- owner, or join the queue. Needs prioritylib.lua.
--
-- lock, queueKey, recordsKey  KEYS[1..3], and KEYS[4]: as in prioritylib.lua
-- lease          ARGV[1]: lease in milliseconds
-- owner          ARGV[2]: owner field
-- alive          ARGV[3]: alive window in milliseconds: a queued waiter that makes no
--          attempt for this long is taken for dead
-- join           ARGV[4]: "1" to join the queue when the lock cannot be taken, "0" to try
--          once and leave no trace
-- pub            ARGV[5]: publish command: "publish", "spublish", or "" to announce nothing
-- message        ARGV[6]: the message that tells a waiter its turn has come ("0")
-- grantTry       ARGV[7]: "0", or, when the owner takes grants (see handOff), this
--          attempt's number within its call (from 1); from its second
--          attempt on it takes a hold it finds (see claim). Only a waiter
--          whose owner was made for this one call may.
-- askedPriority  ARGV[8]: the priority, 0 to 255
-- aging          ARGV[9]: the aging: how many microseconds one level of priority moves a
--          waiter's place earlier
--
-- A waiter already queued keeps its place, and its attempt renews its
-- record. When the lock is free but the best place is another waiter's,
-- that waiter is told (or granted the lock): a release would have told it,
-- but a lock that expired or was deleted, or a head taken for dead, tells
-- nobody.
--
-- Reply: nil when taken (count up, TTL = lease), or when an owner that
-- takes grants finds its hold. Otherwise: trying once, 1; queued, the
-- lock's PTTL, or 0 when it is free and the turn is another's.

local lease, owner, alive, join, pub, message = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local grantTry, askedPriority, aging = ARGV[7], ARGV[8], ARGV[9]

local t, micros = nowMs(), nowMicros()
dropDead(t)

local try = tonumber(grantTry)
if try > 1 and claim(owner, lease) then
	return nil
end
local free = redis.call('exists', lock) == 0
if free then
	local h = head()
	if not h or h == owner then
		grant(owner, lease)
		redis.call('hdel', recordsKey, owner)
		return nil
	end
	handOff(pub, message, t)
end
if redis.call('hexists', lock, owner) == 1 then
	redis.call('hincrby', lock, owner, 1)
	redis.call('pexpire', lock, lease)
	return nil
end
if join ~= '1' then
	return 1
end
local window = tonumber(alive)
local _, priority, arrival = record(owner)
if not priority or not redis.call('zscore', queueKey, owner) then
	priority, arrival = askedPriority, micros
	redis.call('zadd', queueKey, tonumber(micros) - tonumber(priority) * tonumber(aging), owner)
end
local by = 0
if try > 0 then
	by = t + tonumber(lease)
end
redis.call('hset', recordsKey, owner, (t + window) .. ':' .. priority .. ':' .. arrival .. ':' .. by .. ':' .. try)
keep(math.max(window, tonumber(lease)))
return math.max(0, redis.call('pttl', lock))
