-- electionproclaim.lua: record owner, which holds the election's lock
-- with term (the fenced token its hold drew), as the leader, with value.
--
-- lock      KEYS[1]: the election's lock, Redisson's RLock hash N
-- record    KEYS[2]: the leader on record, HASH relock_election:{N}:
--           value, owner, term, since (ms of Redis's clock: when the term
--           began); a term stays after its leader resigns, so that no
--           smaller one can be recorded again
-- channel   KEYS[3]: relock_election_channel:{N}, where a change of the
--           record is announced with its term
-- owner     ARGV[1]
-- term      ARGV[2]
-- value     ARGV[3]
-- pub       ARGV[4]: "publish", "spublish", or "" to announce nothing (a
--           user with no channel rights: observers re-read instead)
--
-- Reply: 1 when recorded; 0 when owner does not hold lock (it lost it);
-- -1 when the record has a larger term (a newer leader): nothing changes.
local lock, record, channel = KEYS[1], KEYS[2], KEYS[3]
local owner, term, value, pub = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local nowMs = clockLib()

if redis.call('hexists', lock, owner) == 0 then
	return 0
end
-- HMGET, as every election script reads the record: a user without the
-- rights an election needs (docs/deployment.md) is refused here, as the
-- leadership begins, not at its Resign.
local r = redis.call('hmget', record, 'term', 'since')
local current, since = r[1], r[2]
if current and tonumber(current) > tonumber(term) then
	return -1
end
if current ~= term or not since then
	since = nowMs()
	-- A request to resign was made of the term before (electionrequest.lua).
	redis.call('hdel', record, 'request')
end
redis.call('hset', record, 'value', value, 'owner', owner, 'term', term, 'since', since)
if pub ~= '' then redis.call(pub, channel, term) end
return 1
