-- fenced.lua: a read or write of a plain string key, fenced by a token
-- (a fenced lock's, or an election's term): it goes through only when no
-- larger token has been seen for the key, and raises the token seen to
-- its own, atomically with the read or write (docs/fencing.md: a read that
-- feeds a write must carry the token too).
--
-- key       KEYS[1]: the value, a string
-- fence     KEYS[2]: the largest token seen for it, relock_fence:{key}
-- token     ARGV[1]: an integer of 1 or more (the Go side checks)
-- op        ARGV[2]: "get" or "set"
-- value     ARGV[3]: with "set"
--
-- Reply: {1, the value (false when the key is missing) or "OK"} when it
-- went through; {0, the larger token seen} when refused, changing nothing.
-- A key that holds anything but a string, or a fence anything but an
-- integer, fails with a WRONGTYPE reply before anything changes.
local key, fence = KEYS[1], KEYS[2]
local token, op, value = ARGV[1], ARGV[2], ARGV[3]

local kind = redis.call('type', key)['ok']
if kind ~= 'none' and kind ~= 'string' then
	return redis.error_reply('WRONGTYPE the key holds a ' .. kind .. ', where a fenced string belongs')
end
local seen = redis.pcall('get', fence)
if type(seen) == 'table' or seen and not string.match(seen, '^%d+$') then
	return redis.error_reply('WRONGTYPE the fence ' .. fence .. ' holds something other than a term')
end
if seen and tonumber(seen) > tonumber(token) then
	return {0, seen}
end
if seen ~= token then
	redis.call('set', fence, token)
end
if op == 'set' then
	redis.call('set', key, value)
	return {1, 'OK'}
end
return {1, redis.call('get', key)}
