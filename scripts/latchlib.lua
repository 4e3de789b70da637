-- latchlib.lua: Redisson's unlock latch (redisson_unlock_latch:{N}:<id>,
-- Redisson 3.24.1+), which every release script reads first and writes
-- last: the reply of one release request, kept for the release window, so
-- that a release sent again after its reply was lost answers as it did
-- instead of releasing twice.

-- latchedReply returns the reply latch keeps, when the request may have
-- been sent before (again "1"; a script without the argument always
-- looks, as Redisson's read-write lock's do); nil when there is none.
local function latchedReply(latch, again)
	if again == nil or again == '1' then
		local earlier = redis.call('get', latch)
		if earlier then
			return tonumber(earlier)
		end
	end
	return nil
end

-- latchReply keeps reply in latch for ttl ms.
local function latchReply(latch, reply, ttl)
	redis.call('set', latch, reply, 'px', ttl)
end

