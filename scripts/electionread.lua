-- electionread.lua: the leader on record, if it still holds the lock.
--
-- lock      KEYS[1]: the election's lock hash N
-- record    KEYS[2]: relock_election:{N} (see electionproclaim.lua)
--
-- Reply: {value, owner, term, since, the lock's PTTL, request} when the
-- owner on record holds the lock, request being the successor asked for by
-- electionrequest.lua ("" when none); else {"", "", term, "", -2, ""},
-- term being the last one recorded ("0" for none): there is no leader now.
local lock, record = KEYS[1], KEYS[2]

local r = redis.call('hmget', record, 'value', 'owner', 'term', 'since', 'request')
local term = r[3] or '0'
-- Asked with no owner on record too: a lock that is not a hash fails
-- here, with WRONGTYPE, rather than read as nobody leading.
if redis.call('hexists', lock, r[2] or '') == 0 then
	return {'', '', term, '', -2, ''}
end
return {r[1], r[2], term, r[4], redis.call('pttl', lock), r[5] or ''}
