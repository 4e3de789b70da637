-- electionresign.lua: take owner, leader with term, off the record, and
-- announce it; the caller then releases the lock. The term stays (see
-- electionproclaim.lua).
--
-- record    KEYS[1]: relock_election:{N}
-- channel   KEYS[2]: relock_election_channel:{N}
-- owner     ARGV[1]
-- term      ARGV[2]
-- pub       ARGV[3]: as electionproclaim.lua's
--
-- Reply: 1 when owner with term was on record; 0 when not (nothing
-- changes).
local record, channel = KEYS[1], KEYS[2]
local owner, term, pub = ARGV[1], ARGV[2], ARGV[3]

local r = redis.call('hmget', record, 'owner', 'term')
if r[1] ~= owner or r[2] ~= term then
	return 0
end
redis.call('hdel', record, 'owner', 'value', 'since', 'request')
if pub ~= '' then redis.call(pub, channel, term) end
return 1
