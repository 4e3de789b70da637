-- count.lua: read a count kept in a string key (a semaphore's permits, a
-- latch's count). A script, not GET, because rueidis sends a read again
-- and again while the connection is down, until the caller's ctx ends; a
-- waiter must learn of the outage at once, to say so when its wait ends.
--
-- key  KEYS[1]: the key
--
-- Reply: its value, 0 when it is missing.

local key = KEYS[1]

local v = redis.call('get', key)
if v == false then
	return 0
end
return tonumber(v)
