-- holdlib.lua: one hold given back on Redisson's RLock hash (owner ->
-- hold count), the middle of the release scripts of the plain, fenced,
-- fair and priority locks, between the unlock latch's read and its write
-- (latchlib.lua). What a freed lock announces, and to whom, is each
-- layout's own (freed).

-- giveBackHold takes one hold of owner off lock: while holds remain, the
-- hash keeps lease ms to live and it returns 0; the last one deletes the
-- hash, runs freed, and returns 1. It returns nil, changing nothing, when
-- owner holds nothing.
--
-- The state it leaves is that of Redisson's unlockInnerAsync (HEXISTS,
-- HINCRBY -1, then PEXPIRE or DEL), in one command fewer where it matters
-- most, the release that frees the lock: HGETALL reads owner's count and
-- whether it is the only field, and HDEL of the only field deletes the
-- hash. A keyspace notification watcher sees "hdel" then "del", a release
-- (Java's DeletedObjectListener hears the "del" as ever); anything else (a
-- count above 1, another field beside owner's, a count that is not a
-- number) takes Redisson's own steps, HINCRBY's error included.
local function giveBackHold(lock, owner, lease, freed)
	local fields = redis.call('hgetall', lock)
	local count
	for i = 1, #fields, 2 do
		if fields[i] == owner then
			count = fields[i + 1]
		end
	end
	if count == nil then
		return nil
	end
	if #fields == 2 and count == '1' then
		redis.call('hdel', lock, owner)
	else
		if redis.call('hincrby', lock, owner, -1) > 0 then
			redis.call('pexpire', lock, lease)
			return 0
		end
		redis.call('del', lock)
	end
	freed()
	return 1
end
