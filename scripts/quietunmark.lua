-- quietunmark.lua: a quiet lock's holder, done with its work, takes its
-- marker away before it releases the lock, so that a release is followed
-- by no quiet period (see quietmark.lua).
--
-- marker  KEYS[1]: relock_quiet:{N}
-- owner   ARGV[1]: owner field
--
-- Reply: 1 when owner's marker was deleted, 0 when the marker names
-- another owner or is gone.
local mark = redis.call('get', KEYS[1])
if mark and string.match(mark, '^%d+:(.*)$') == ARGV[1] then
	return redis.call('del', KEYS[1])
end
return 0
