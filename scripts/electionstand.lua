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
-- lock      KEYS[3]: the election's lock hash N
-- wakes     KEYS[4]: the lock's channel, redisson_lock__channel:{N}
--
-- A candidate that leaves gives back the lock a leader handed to it and
-- it did not take (its field with count 0, see electionhandover.lua): its
-- Campaign ended first, so the next waiter is woken now, not when the
-- handover's window runs out.
--
-- Reply: 1 when done; 0 when standing and reg is not held (it was lost),
-- or when leaving and owner's entry is another Campaign's: nothing
-- changes then.
local roll, channel, lock, wakes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, value, prefix, pub, leave, reg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local lib = candidateLib()
if leave == '1' then
	if not lib.drop(roll, owner, reg) then
		return 0
	end
	if redis.call('hget', lock, owner) == '0' then
		redis.call('hdel', lock, owner)
		if pub ~= '' then redis.call(pub, wakes, '0') end
	end
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
