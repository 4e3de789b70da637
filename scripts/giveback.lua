-- giveback.lua: a client takes back its offer of a plain lock's handoff
-- (see handOn in wakelib.lua) that none of its waiters will take: the offer
-- is withdrawn, so that no release gives it from now on, and if a release
-- gave it already, the lock is released as its owner would release it,
-- and handed on.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock channel, redisson_lock__channel:{N}
-- KEYS[3]  the waiters' set, relock_waiters:{N}
-- KEYS[4]  the offers' hash, relock_grants:{N}
-- ARGV[1]  the client's id
-- ARGV[2]  the owner number of its offer
-- ARGV[3]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[4]  the message published when the lock becomes free ("00")
-- ARGV[5]  how many ms at least the client will still listen on KEYS[2]
--          (see handOn and leave), "0" when it does not listen there
-- ARGV[6]  "1" when the client has no waiter left: it leaves the waiters'
--          set, with its offer (see leave)
--
-- Reply: 1 when the lock had been given (and is now released), 0 when not.
local counted -- whether the client is counted by handOn; nil: not read
if ARGV[6] == '1' then
	counted = wakeLib().leave(KEYS[3], KEYS[4], ARGV[1], ARGV[5])
else
	wakeLib().withdraw(KEYS[4], ARGV[1], ARGV[2])
end
local owner = ARGV[1] .. ':' .. ARGV[2]
local count = redis.call('hget', KEYS[1], owner)
if not count then
	return 0
end
if tonumber(count) > 1 then -- a handoff is one hold; someone took it again
	redis.call('hincrby', KEYS[1], owner, -1)
	return 1
end
redis.call('del', KEYS[1])
local heard = ARGV[3] ~= '' and redis.call(ARGV[3], KEYS[2], ARGV[4]) or 0
if heard > 0 then
	local releaser = ARGV[5] ~= '0' and ARGV[1] or nil
	wakeLib().handOn(KEYS[1], KEYS[3], KEYS[4], ARGV[3], heard, releaser, counted)
end
return 1
