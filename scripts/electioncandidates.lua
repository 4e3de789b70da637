-- electioncandidates.lua: the election's live candidates, and who leads.
--
-- lock      KEYS[1]: the election's lock hash N
-- record    KEYS[2]: relock_election:{N}
-- roll      KEYS[3]: relock_election_candidates:{N}
-- prefix    ARGV[1]: the registrations' prefix (see candidatelib.lua)
--
-- Reply: {leader, c1, c2, ...}: leader the owner on record while it holds
-- the lock, else ""; each c {owner, since ms, value, registration PTTL},
-- oldest first. It writes nothing.
local lock, record, roll = KEYS[1], KEYS[2], KEYS[3]
local prefix = ARGV[1]

local leader = redis.call('hget', record, 'owner')
if not leader or redis.call('hexists', lock, leader) == 0 then
	leader = ''
end
local out = {leader}
for _, c in ipairs(candidateLib().standing(roll, prefix)) do
	out[#out + 1] = c
end
return out
