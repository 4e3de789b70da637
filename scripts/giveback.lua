-- giveback.lua: a client takes back its offer of a plain lock's handoff
-- (see handOn in wakelib.lua) that none of its waiters will take: the offer
-- is withdrawn, so that no release gives it from now on, and if a release
-- gave it already, the lock is released as its owner would release it,
-- and handed on.
--
-- lock     KEYS[1]: the lock hash N
-- channel  KEYS[2]: the lock channel, redisson_lock__channel:{N}
-- waiters  KEYS[3]: the waiters' set, relock_waiters:{N}
-- offers   KEYS[4]: the offers' hash, relock_grants:{N}
-- client   ARGV[1]: the client's id
-- offered  ARGV[2]: its offer, "<n>:<last>", owner numbers n to last that
--          none of its waiters took (see offer in wakelib.lua)
-- pub      ARGV[3]: publish command: "publish", "spublish", or "" to announce nothing
-- message  ARGV[4]: the message published when the lock becomes free ("00")
-- listens  ARGV[5]: how many ms at least the client will still listen on channel
--          (see handOn and leave), "0" when it does not listen there
-- leaving  ARGV[6]: "1" when the client has no waiter left: it leaves the waiters'
--          set, with its offer (see leave)
--
-- Reply: 1 when the lock had been given (and is now released), 0 when not.

local lock, channel, waiters, offers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local client, offered, pub, message, listens, leaving = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local counted -- whether the client is counted by handOn; nil: not read
if leaving == '1' then
	counted = wakeLib().leave(waiters, offers, client, listens)
else
	wakeLib().withdraw(offers, client, offered)
end
-- The lock's owner, if a release gave it one of the offer's numbers.
local from, last = string.match(offered, '^(%d+):(%d+)$')
local prefix = client .. ':'
local owner
for _, field in ipairs(redis.call('hkeys', lock)) do
	local n = string.sub(field, 1, #prefix) == prefix and tonumber(string.match(string.sub(field, #prefix + 1), '^%d+$'))
	if n and n >= tonumber(from) and n <= tonumber(last) then
		owner = field
	end
end
if not owner then
	return 0
end
if redis.call('hincrby', lock, owner, -1) > 0 then -- a handoff is one hold; someone took it again
	return 1
end
redis.call('del', lock) -- after HINCRBY, which a keyspace watcher reads as a release (see holdlib.lua)
local heard = pub ~= '' and redis.call(pub, channel, message) or 0
if heard > 0 then
	local releaser = listens ~= '0' and client or nil
	wakeLib().handOn(lock, waiters, offers, pub, heard, releaser, counted)
end
return 1
