-- semrelease.lua: give permits back to a semaphore, or add them.
-- RedissonSemaphore.releaseAsync (INCRBY, publish the total),
-- releaseIfExistsAsync (the same, only when N exists) and addPermitsAsync
-- (SET value+n, publish the total) change N the same way: INCRBY creates a
-- missing N at 0 first, as addPermits's "value = 0" does.
--
-- KEYS[1]  the semaphore N
-- KEYS[2]  its channel, redisson_sc:{N}
-- ARGV[1]  how many permits (negative only from addPermits)
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
-- ARGV[3]  "1": only when N exists (releaseIfExists); "" : always
--
-- The new total is published when it is above 0. Redisson publishes it
-- always; a Java waiter wakes min(its waiters, total) of its waiters, and
-- Java's Semaphore.release throws on a negative count, so a total of 0 or
-- less, which wakes nobody, is not sent. Reply: the new total, or nil when
-- ARGV[3] is "1" and N is missing (nothing changed).
if ARGV[3] == '1' and redis.call('exists', KEYS[1]) == 0 then
	return false
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
if value > 0 then
	if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], value) end
end
return value
