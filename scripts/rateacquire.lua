-- rateacquire.lua: take permits from a rate limiter's window, or learn how
-- long until they may be there. RedissonRateLimiter.tryAcquireAsync
-- (RedisCommand, Long), step for step (keys: see ratelib.lua).
--
-- count             ARGV[1]: how many permits (> 0, at most the rate)
-- salt              ARGV[2]: 16 random bytes, which make the window member unique
--
-- Reply: nil when taken; else the ms to wait before trying again.

local count, salt = ARGV[1], ARGV[2]

local rate, interval, valueName, permitsName = config()
if rate == nil then
	return redis.error_reply(notSet)
end
if rate < tonumber(count) then
	return redis.error_reply(aboveRate)
end
local t = nowMs()
local member = pack(salt, count)
local current = redis.call('get', valueName)
local res
if current ~= false then
	local expired = redis.call('zrangebyscore', permitsName, 0, t - interval)
	local released = taken(expired)
	if released > 0 then
		redis.call('zremrangebyscore', permitsName, 0, t - interval)
		if tonumber(current) + released > rate then
			current = rate - taken(redis.call('zrange', permitsName, 0, -1))
		else
			current = tonumber(current) + released
		end
		redis.call('set', valueName, current)
	end
	if tonumber(current) < tonumber(count) then
		local first = redis.call('zrange', permitsName, 0, 0, 'withscores')
		res = 3 + interval - (t - tonumber(first[2]))
	else
		redis.call('zadd', permitsName, string.format('%.0f', t), member)
		redis.call('decrby', valueName, count)
	end
else
	redis.call('set', valueName, rate)
	redis.call('zadd', permitsName, string.format('%.0f', t), member)
	redis.call('decrby', valueName, count)
end
keepAlive(valueName, permitsName)
return res
