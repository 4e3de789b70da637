-- electionhandover.lua: the leader gives the election's lock to a
-- successor in place of its release, and leaves the record, as
-- electionresign.lua does.
--
-- lock      KEYS[1]: the election's lock hash N (a fenced lock)
-- record    KEYS[2]: relock_election:{N}
-- channel   KEYS[3]: relock_election_channel:{N}
-- roll      KEYS[4]: relock_election_candidates:{N}
-- wakes     KEYS[5]: the lock's channel, redisson_lock__channel:{N}
-- owner     ARGV[1]: the leader's field
-- term      ARGV[2]
-- to        ARGV[3]: the successor's owner; "*": the candidate standing
--           longest beside the leader
-- window    ARGV[4]: ms the lock is kept for the successor
-- pub       ARGV[5]: as electionproclaim.lua's
-- restore   ARGV[6]: ms, the lock's TTL while holds of owner remain
-- prefix    ARGV[7]: the registrations' prefix (see candidatelib.lua)
-- reg       ARGV[8]: the leader's registration
--
-- The successor, a live candidate, gets the lock as a field of its own
-- with count 0, kept window ms: its next attempt (every waiter is woken)
-- takes it, as an owner's re-entry does, drawing a larger token; any other
-- attempt finds the lock held. If it does not come within window, the
-- lock expires and the next waiter takes it. With no live successor the
-- lock is released, as Unlock would. The leader leaves the roll in the
-- same step: a candidate whose leadership ended no longer stands, and a
-- successor resigning at once must not hand back to it.
--
-- Reply: {1, successor} handed on; {0} released, nobody to hand to; {2}
-- holds of owner remain (one given back); {-1} owner holds nothing.
local lock, record, channel, roll, wakes = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local owner, term, to, window, pub, restore, prefix, reg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]

local count = redis.call('hget', lock, owner)
if not count then
	return {-1}
end
if tonumber(count) > 1 then
	redis.call('hincrby', lock, owner, -1)
	redis.call('pexpire', lock, restore)
	return {2}
end
local r = redis.call('hmget', record, 'owner', 'term')
local lib = candidateLib()
if lib.drop(roll, owner, reg) and pub ~= '' then
	redis.call(pub, channel, 'c')
end
if r[1] == owner and r[2] == term then
	redis.call('hdel', record, 'owner', 'value', 'since', 'request')
	if pub ~= '' then redis.call(pub, channel, term) end
end
local successor
if to == '*' then
	for _, c in ipairs(lib.standing(roll, prefix)) do
		if c[1] ~= owner then
			successor = c[1]
			break
		end
	end
elseif to ~= owner and lib.live(roll, prefix, to) then
	successor = to
end
redis.call('del', lock)
if not successor then
	if pub ~= '' then redis.call(pub, wakes, '0') end
	return {0}
end
redis.call('hset', lock, successor, 0)
redis.call('pexpire', lock, window)
if pub ~= '' then redis.call(pub, wakes, '1') end
return {1, successor}
