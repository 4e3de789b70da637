-- groupinspect.lua: read a group lock's values (for IsLocked, HoldCount,
-- RemainTTL). See grouplib.lua.
--
-- KEYS[1]  the group's hash G
-- ARGV[1..] the values' fields
--
-- Reply: one entry per value: {holder, ms left, hold count}, or {} when
-- nobody holds it (no holder, or its holder's hold has ended).
local g = KEYS[1]
local now = nowMs()
local out = {}
for i = 1, #ARGV do
	local holder = redis.call('hget', g, ARGV[i])
	local e = holder and heldUntil(g, ARGV[i], holder, now)
	if e then
		out[i] = {holder, e - now, tonumber(redis.call('hget', g, countField(ARGV[i], holder))) or 0}
	else
		out[i] = {}
	end
end
return out
