-- electionrequest.lua: ask the election's leader to resign, handing over
-- to a successor. The leader learns it from the record (field request,
-- cleared with its term), read when the channel tells it.
--
-- lock      KEYS[1]: the election's lock hash N
-- record    KEYS[2]: relock_election:{N}
-- channel   KEYS[3]: relock_election_channel:{N}
-- roll      KEYS[4]: relock_election_candidates:{N}
-- to        ARGV[1]: the successor's owner, or "*" for the candidate
--           standing longest
-- prefix    ARGV[2]: the registrations' prefix (see candidatelib.lua)
-- pub       ARGV[3]: as electionproclaim.lua's
--
-- Reply: {1, term, leader} asked; {0} nobody leads; {-1} to is no live
-- candidate; {-2} to is the leader. Only {1} writes.
local lock, record, channel, roll = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local to, prefix, pub = ARGV[1], ARGV[2], ARGV[3]

local r = redis.call('hmget', record, 'owner', 'term')
local leader, term = r[1], r[2]
if not leader or redis.call('hexists', lock, leader) == 0 then
	return {0}
end
if to == leader then
	return {-2}
end
if to ~= '*' and not candidateLib().live(roll, prefix, to) then
	return {-1}
end
redis.call('hset', record, 'request', to)
if pub ~= '' then redis.call(pub, channel, term) end
return {1, term, leader}
