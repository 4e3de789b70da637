-- permitrenew.lua: extend the leases of many taken permits in one call
-- (the watchdog's renewal of permits taken without a lease). relock's own:
-- Redisson has no watchdog for permits.
--
-- KEYS[i]    a permits ZSET {N}:timeout; all keys share a cluster slot
-- ARGV[1]    the new lease in milliseconds
-- ARGV[i+1]  the permit id in KEYS[i], 16 raw bytes
--
-- Reply: an array with one integer per key: 1 when the permit was taken and
-- its lease not ended, and it now ends ARGV[1] from now; 0 when not (it was
-- released, reclaimed, or its lease ended: a 0 changes nothing, so a permit
-- whose lease ended is never brought back).
local t = redis.call('time')
t = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local renewed = {}
for i = 1, #KEYS do
	local score = redis.pcall('zscore', KEYS[i], ARGV[i + 1])
	if type(score) == 'string' and tonumber(score) > t then
		redis.call('zadd', KEYS[i], string.format('%.0f', t + tonumber(ARGV[1])), ARGV[i + 1])
		renewed[i] = 1
	else
		renewed[i] = 0
	end
end
return renewed
