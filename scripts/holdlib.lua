-- holdlib.lua: one hold given back on Redisson's RLock hash (owner ->
-- hold count), the middle of the release scripts of the plain, fenced,
-- fair and priority locks, between the unlock latch's read and its write
-- (latchlib.lua). What a freed lock announces, and to whom, is each
-- layout's own (freed).

-- giveBackHold takes one hold of owner off lock: while holds remain, the
-- hash keeps lease ms to live and it returns 0; the last one deletes the
-- hash, runs freed, and returns 1. It returns nil, changing nothing, when
-- owner holds nothing. The steps are Redisson's unlockInnerAsync's
-- (HEXISTS, HINCRBY -1, then PEXPIRE or DEL), so that a keyspace
-- notification watcher sees a release as Java's: hincrby, then del.
local function giveBackHold(lock, owner, lease, freed)
	if redis.call('hexists', lock, owner) == 0 then
		return nil
	end
	if redis.call('hincrby', lock, owner, -1) > 0 then
		redis.call('pexpire', lock, lease)
		return 0
	end
	redis.call('del', lock)
	freed()
	return 1
end
