-- passon.lua: hand on a directed wake (see wakelib.lua) that reached a
-- client with no waiter left to take it: the client leaves the waiters'
-- set, and if the lock is free the next registered client is told.
--
-- lock     KEYS[1]: the lock hash N
-- waiters  KEYS[2]: the waiters' set, relock_waiters:{N}
-- offers   KEYS[3]: the offers' hash, relock_grants:{N}: the client's offer goes
--          with its registration (see drop in wakelib.lua)
-- client   ARGV[1]: the client's id
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
-- listens  ARGV[3]: how many ms at least the client will still listen on Redisson's
--          channel (see leave in wakelib.lua), "0" when it does not listen
--
-- Reply: 1 when the lock was free (and the next client, if any, was told),
-- 0 when it was held.

local lock, waiters, offers = KEYS[1], KEYS[2], KEYS[3]
local client, pub, listens = ARGV[1], ARGV[2], ARGV[3]

wakeLib().leave(waiters, offers, client, listens)
if redis.call('exists', lock) == 1 then
	return 0
end
wakeLib().wakeNext(waiters, pub, offers)
return 1
