-- quietmark.lua: a quiet lock's marker (relock's own, package
-- reentrant/quiet): while owner holds the lock, the marker names owner and
-- lives past the lock's expiry by the quiet period. So when
-- the hold ends without a release (it expired, or was force-unlocked),
-- the marker outlives it by the quiet period at least, and the next quiet
-- holder waits that out before its work begins.
--
-- lock    KEYS[1]: the lock hash N
-- marker  KEYS[2]: relock_quiet:{N}
-- owner   ARGV[1]: owner field
-- quiet   ARGV[2]: the quiet period in milliseconds
--
-- The marker is the string "<quiet>:<owner>", its TTL the lock's plus
-- quiet; renew.lua keeps it so as it renews the lock.
--
-- Reply: 0 when the marker now names owner; the marker's PTTL (> 0) when
-- another owner's hold ended unreleased within the quiet period, changing
-- nothing; -1 when owner does not hold the lock. A marker that is not a
-- string fails with WRONGTYPE before anything changes.
local lock, marker = KEYS[1], KEYS[2]
local owner, quiet = ARGV[1], ARGV[2]

if redis.call('hexists', lock, owner) == 0 then
	return -1
end
local was = redis.call('get', marker)
if was and string.match(was, '^%d+:(.*)$') ~= owner then
	local left = redis.call('pttl', marker)
	if left > 0 then
		return left
	end
end
local ttl = redis.call('pttl', lock)
if ttl < 0 then
	ttl = 0
end
redis.call('set', marker, quiet .. ':' .. owner, 'px', ttl + tonumber(quiet))
return 0
