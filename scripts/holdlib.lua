-- holdlib.lua: one hold given back on Redisson's RLock hash (owner ->
-- hold count), the middle of the release scripts of the plain, fenced,
-- fair and priority locks, between the unlock latch's read and its write
-- (latchlib.lua). What a freed lock announces, and to whom, is each
-- layout's own (freed).

-- giveBackHold takes one hold of owner off lock: while holds remain, the
-- hash keeps lease ms to live and it returns 0; the last one deletes the
-- hash (its count needs no update), runs freed, and returns 1. It returns
-- nil, changing nothing, when owner holds nothing.
local function giveBackHold(lock, owner, lease, freed)
	local count = redis.call('hget', lock, owner)
	if not count then
		return nil
	end
	if tonumber(count) > 1 then
		redis.call('hincrby', lock, owner, -1)
		redis.call('pexpire', lock, lease)
		return 0
	end
	redis.call('del', lock)
	freed()
	return 1
end
