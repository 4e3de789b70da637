-- semrelease.lua: give permits back to a semaphore, or add them.
-- RedissonSemaphore.releaseAsync (INCRBY, publish the total),
-- releaseIfExistsAsync (the same, only when N exists) and addPermitsAsync
-- (SET value+n, publish the total) change N the same way: INCRBY creates a
-- missing N at 0 first, as addPermits's "value = 0" does.
--
-- sem       KEYS[1]: the semaphore N
-- channel   KEYS[2]: its channel, redisson_sc:{N}
-- count     ARGV[1]: how many permits (negative only from addPermits)
-- pub       ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
-- ifExists  ARGV[3]: "1": only when N exists (releaseIfExists); "" : always
--
-- The new total is published when it is above 0. Redisson publishes it
-- always; a Java waiter wakes min(its waiters, total) of its waiters, and
-- Java's Semaphore.release throws on a negative count, so a total of 0 or
-- less, which wakes nobody, is not sent. Reply: the new total, or nil when
-- ifExists is "1" and N is missing (nothing changed).

local sem, channel = KEYS[1], KEYS[2]
local count, pub, ifExists = ARGV[1], ARGV[2], ARGV[3]

if ifExists == '1' and redis.call('exists', sem) == 0 then
	return false
end
local value = redis.call('incrby', sem, count)
if value > 0 then
	if pub ~= '' then redis.call(pub, channel, value) end
end
return value
