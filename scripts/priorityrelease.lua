-- priorityrelease.lua: give back one hold of a priority lock; the last one
-- hands the lock on to the best-placed waiter (see handOff in
-- prioritylib.lua). Needs prioritylib.lua.
--
-- KEYS[1..4]  as in prioritylib.lua
-- KEYS[5]  the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- ARGV[1]  the message published ("0")
-- ARGV[2]  lease in milliseconds, restored while holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[5]  latch TTL in milliseconds
-- ARGV[6]  "1" when this request may have been sent before, so that its
--          latch may hold its reply; "0" for a first send, which skips it
-- ARGV[7]  "1" when the caller believes it has the hold (see
--          Release.Believed): a release that frees the lock writes no latch
--
-- Reply: 1 when that was the last hold (the hash is deleted, or given to
-- the best-placed waiter); 0 when holds remain; nil when the owner held
-- nothing, and nothing changes but that a lock already gone (it expired)
-- is handed on. The latch remembers the reply of this request id, as in
-- fairrelease.lua.
if ARGV[6] == '1' then
	local earlier = redis.call('get', KEYS[5])
	if earlier then
		return tonumber(earlier)
	end
end
local t = nowMs()
dropDead(t)
-- The mark of a grant the owner took has served.
if redis.call('hget', KEYS[3], ARGV[3]) == '0' then
	redis.call('hdel', KEYS[3], ARGV[3])
end
if redis.call('exists', KEYS[1]) == 0 then
	handOff(ARGV[4], ARGV[1], t)
	return nil
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
	return nil
end
local reply = 0
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
	redis.call('pexpire', KEYS[1], ARGV[2])
else
	redis.call('del', KEYS[1])
	handOff(ARGV[4], ARGV[1], t)
	if ARGV[7] == '1' then
		return 1
	end
	reply = 1
end
redis.call('set', KEYS[5], reply, 'px', ARGV[5])
return reply
