-- semacquire.lua: take permits of a semaphore, or none.
-- RedissonSemaphore.tryAcquireAsync0, step for step.
--
-- sem    KEYS[1]: the semaphore N, a string holding the available permits
-- count  ARGV[1]: how many permits to take (> 0)
--
-- Reply: 1 when they were taken (DECRBY), 0 when fewer are available (or
-- N is missing), and then nothing is changed.

local sem = KEYS[1]
local count = ARGV[1]

local value = redis.call('get', sem)
if value ~= false and tonumber(value) >= tonumber(count) then
	redis.call('decrby', sem, count)
	return 1
end
return 0
