-- priorityacquire.lua: take a priority lock (relock's own kind) when it is
-- free and the owner is the best-placed waiter, take it again as its
-- owner, or join the queue. Needs prioritylib.lua.
--
-- KEYS[1..4]  as in prioritylib.lua
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  alive window in milliseconds: a queued waiter that makes no
--          attempt for this long is taken for dead
-- ARGV[4]  "1" to join the queue when the lock cannot be taken, "0" to try
--          once and leave no trace
-- ARGV[5]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[6]  the message that tells a waiter its turn has come ("0")
-- ARGV[7]  "0", or, when the owner takes grants (see handOff), this
--          attempt's number within its call (from 1); from its second
--          attempt on it takes a hold it finds (see claim). Only a waiter
--          whose owner was made for this one call may.
-- ARGV[8]  the priority, 0 to 255
-- ARGV[9]  the aging: how many microseconds one level of priority moves a
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
local t, micros = nowMs(), nowMicros()
dropDead(t)
local owner = ARGV[2]
local try = tonumber(ARGV[7])
if try > 1 and claim(owner, ARGV[1]) then
	return nil
end
local free = redis.call('exists', KEYS[1]) == 0
if free then
	local h = head()
	if not h or h == owner then
		grant(owner, ARGV[1])
		redis.call('hdel', KEYS[3], owner)
		return nil
	end
	handOff(ARGV[5], ARGV[6], t)
end
if redis.call('hexists', KEYS[1], owner) == 1 then
	redis.call('hincrby', KEYS[1], owner, 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return nil
end
if ARGV[4] ~= '1' then
	return 1
end
local window = tonumber(ARGV[3])
local _, priority, arrival = record(owner)
if not priority or not redis.call('zscore', KEYS[2], owner) then
	priority, arrival = ARGV[8], micros
	redis.call('zadd', KEYS[2], tonumber(micros) - tonumber(priority) * tonumber(ARGV[9]), owner)
end
local by = 0
if try > 0 then
	by = t + tonumber(ARGV[1])
end
redis.call('hset', KEYS[3], owner, (t + window) .. ':' .. priority .. ':' .. arrival .. ':' .. by .. ':' .. try)
keep(math.max(window, tonumber(ARGV[1])))
return math.max(0, redis.call('pttl', KEYS[1]))
