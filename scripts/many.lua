
-- many.lua: the tail of a script that runs its body (the function one,
-- above) once for each of many calls, so that calls many goroutines made
-- at once go in one EVALSHA (see Coalescer).
--
-- KEYS     every call's keys, call after call
-- ARGV[1]  n, the number of calls
-- ARGV[2i], ARGV[2i+1]  call i's number of keys and of args
-- ARGV[2n+2..]  every call's args, call after call
--
-- Reply: an array of n replies, each what the body returned for its call
-- alone: nil (as false, which stays nil on the wire), a number, or an
-- error. A call that fails (WRONGTYPE, say) fails alone, as it would have
-- alone; the calls after it still run.

local n = tonumber(ARGV[1])
local replies = {}
local k, a = 0, 1 + 2 * n
for i = 1, n do
	local nk, na = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
	local keys, args = {}, {}
	for j = 1, nk do
		keys[j] = KEYS[k + j]
	end
	for j = 1, na do
		args[j] = ARGV[a + j]
	end
	k, a = k + nk, a + na
	local ok, r = pcall(one, keys, args)
	if not ok and type(r) ~= 'table' then
		r = {err = tostring(r)}
	elseif r == nil then
		r = false
	end
	replies[i] = r
end
return replies
