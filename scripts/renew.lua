-- renew.lua: extend many held locks in one call (the watchdog's renewal).
--
-- KEYS[i]    a lock hash; all keys of one call share a cluster slot
-- ttl  ARGV[1]: the new TTL in milliseconds
-- ARGV[i+1]  the owner field that must hold KEYS[i]
--
-- A renewed lock's quiet marker, when its owner's, is renewed with it
-- (package reentrant/quiet).
--
-- Reply: an array with one integer per key: 1 when the owner's field was
-- there and the TTL is now ttl; 0 when it was not (the key is gone, has
-- another owner, or is not a hash). A 0 changes nothing: a renewal never
-- extends another owner's lock and never re-creates a vanished one.

local ttl = ARGV[1]

-- A quiet lock's marker (quietmark.lua), when it is the owner's, keeps
-- outliving the lock by its quiet period. Its name is the lock's, as
-- Go's QuietMarker makes it; it shares the lock's slot.
local function keepQuiet(lock, owner)
	local marker = 'relock_quiet:{' .. lock .. '}'
	if string.find(lock, '{', 1, true) then
		marker = 'relock_quiet:' .. lock
	end
	local mark = redis.pcall('get', marker)
	if type(mark) ~= 'string' then
		return
	end
	local quiet, who = string.match(mark, '^(%d+):(.*)$')
	if who == owner then
		redis.call('pexpire', marker, tonumber(ttl) + tonumber(quiet))
	end
end

local renewed = {}
for i = 1, #KEYS do
	local present = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
	if present == 1 then
		redis.call('pexpire', KEYS[i], ttl)
		keepQuiet(KEYS[i], ARGV[i + 1])
		renewed[i] = 1
	else
		renewed[i] = 0
	end
end
return renewed
