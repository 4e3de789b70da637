-- electionresign.lua: take owner, leader with term, off the record, and
-- announce it; the caller then releases the lock. The term stays (see
-- electionproclaim.lua). The leader leaves the roll in the same step,
-- whatever the record says: its candidacy ends with its leadership, and
-- the next leader must not hand over to it (see electionhandover.lua).
--
-- record    KEYS[1]: relock_election:{N}
-- channel   KEYS[2]: relock_election_channel:{N}
-- roll      KEYS[3]: relock_election_candidates:{N}
-- owner     ARGV[1]
-- term      ARGV[2]
-- pub       ARGV[3]: as electionproclaim.lua's
-- reg       ARGV[4]: the leader's registration ("": none to leave)
--
-- Reply: 1 when owner with term was on record; 0 when not (the record
-- does not change).
local record, channel, roll = KEYS[1], KEYS[2], KEYS[3]
local owner, term, pub, reg = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local r = redis.call('hmget', record, 'owner', 'term')
if reg ~= '' and candidateLib().drop(roll, owner, reg) and pub ~= '' then
	redis.call(pub, channel, 'c')
end
if r[1] ~= owner or r[2] ~= term then
	return 0
end
redis.call('hdel', record, 'owner', 'value', 'since', 'request')
if pub ~= '' then redis.call(pub, channel, term) end
return 1
