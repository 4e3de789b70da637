-- locklib.lua: a lock hash as the acquire scripts read it, its PTTL and
-- its owners, read once per script for each lock. many.lua runs the
-- attempts of a client's many waiters in one script, and every one after
-- the first on a lock would read the same again: the clock stands still
-- within a script, and nothing else runs. An attempt that changes the lock
-- (takes it) forgets what was read. Prepended to the scripts that use it.

local lockReads = {}

-- readLock returns lock's PTTL (-2: no key) and the set of its fields,
-- the owners (empty when there is no key). A key of another type fails
-- with WRONGTYPE (HKEYS: PTTL reads any type), and is not remembered.
local function readLock(lock)
	local r = lockReads[lock]
	if not r then
		r = {pttl = redis.call('pttl', lock), owners = {}}
		if r.pttl ~= -2 then
			for _, field in ipairs(redis.call('hkeys', lock)) do
				r.owners[field] = true
			end
		end
		lockReads[lock] = r
	end
	return r.pttl, r.owners
end

-- wroteLock forgets what was read of lock, which the script is changing.
local function wroteLock(lock)
	lockReads[lock] = nil
end
