-- electionstand.lua: owner stands in the election with value, or leaves
-- it (see candidatelib.lua), and the change is announced.
--
-- roll      KEYS[1]: relock_election_candidates:{N}
-- channel   KEYS[2]: relock_election_channel:{N}, told "c" (a candidate
--           came or went; the leader's announcements are its terms)
-- owner     ARGV[1]
-- value     ARGV[2]: what it stands with; ignored when leaving
-- prefix    ARGV[3]: the registrations' prefix, relock_election_candidate:{N}:
-- pub       ARGV[4]: as electionproclaim.lua's
-- leave     ARGV[5]: "1" to leave, "0" to stand
-- reg       ARGV[6]: this Campaign's registration (its owner field)
--
-- Reply: 1 when done; 0 when standing and reg is not held (it was lost),
-- or when leaving and owner's entry is another Campaign's: nothing
-- changes then.
local roll, channel = KEYS[1], KEYS[2]
local owner, value, prefix, pub, leave, reg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local lib = candidateLib()
if leave == '1' then
	local entry = redis.call('hget', roll, owner)
	if not entry then
		return 0
	end
	local _, current = lib.parse(entry)
	if current ~= reg then
		return 0
	end
	redis.call('hdel', roll, owner)
else
	if not lib.held(prefix, reg) then
		return 0
	end
	local nowMs = clockLib()
	redis.call('hset', roll, owner, nowMs() .. ':' .. reg .. ':' .. value)
end
lib.prune(roll, prefix)
if pub ~= '' then redis.call(pub, channel, 'c') end
return 1
