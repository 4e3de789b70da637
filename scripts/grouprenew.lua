-- grouprenew.lua: extend many held group locks in one call (the
-- watchdog's renewal; Redisson's FastMultilockTask). See grouplib.lua.
--
-- KEYS[i]  a group's hash; all keys of one call share a cluster slot
-- ARGV[1]  the new lease in milliseconds
-- then, for each key in turn: the owner, the number n of its values, and
-- the n value fields
--
-- Reply: an array with one integer per key: 1 when the owner still held
-- every value, each of which now ends no sooner than now + lease and the
-- hash lives that long; 0 when it did not (a value has another holder or
-- none, or the key is not a hash), and then that key is not changed.
-- Like Redisson's, a renewal keeps a hold whose end passed while nobody
-- took it: the owner held the value all along.
local lease = tonumber(ARGV[1])
local now = nowMs()
local renewed = {}
local a = 2
for i = 1, #KEYS do
	local g, owner, n = KEYS[i], ARGV[a], tonumber(ARGV[a + 1])
	local first, last = a + 2, a + 1 + n
	local ok = 1
	for j = first, last do
		if redis.pcall('hget', g, ARGV[j]) ~= owner then
			ok = 0
			break
		end
	end
	if ok == 1 then
		for j = first, last do
			local ef = expireField(ARGV[j], owner)
			local e = tonumber(redis.call('hget', g, ef))
			if e == nil or e < now + lease then
				redis.call('hset', g, ef, now + lease)
			end
		end
		extend(g, lease)
	end
	renewed[i] = ok
	a = last + 1
end
return renewed
