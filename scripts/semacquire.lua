-- semacquire.lua: take permits of a semaphore, or none.
-- RedissonSemaphore.tryAcquireAsync0, step for step.
--
-- KEYS[1]  the semaphore N, a string holding the available permits
-- ARGV[1]  how many permits to take (> 0)
--
-- Reply: 1 when they were taken (DECRBY), 0 when fewer are available (or
-- N is missing), and then nothing is changed.
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
	redis.call('decrby', KEYS[1], ARGV[1])
	return 1
end
return 0
