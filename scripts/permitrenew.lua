-- permitrenew.lua: extend the leases of many taken permits in one call
-- (the watchdog's renewal of permits taken without a lease). relock's own:
-- Redisson has no watchdog for permits.
--
-- KEYS[i]      a permits ZSET {N}:timeout; all keys share a cluster slot
-- ARGV[1]      the new lease in milliseconds
-- ARGV[2i]     the permit id in KEYS[i], 16 raw bytes
-- ARGV[2i+1]   the score relock last wrote for it (its lease end, in ms)
--
-- A permit is renewed only while its score is the one relock wrote: a
-- lease another client set since (Redisson's updateLeaseTime) stands, and
-- is reported, not overwritten.
--
-- Reply: an array with one string per key: the new score when the permit
-- was renewed (it now ends ARGV[1] from now); "leased:<ms>" when its score
-- was changed by someone else, with the ms left of that lease
-- ("leased:none" for no lease, Redisson's 922337203685477); "0" when it is
-- not taken (released, reclaimed, or its lease ended: a "0" changes
-- nothing, so a permit whose lease ended is never brought back).
local nowMs = clockLib()
local t = nowMs()
local out = {}
for i = 1, #KEYS do
	local id, wrote = ARGV[2 * i], ARGV[2 * i + 1]
	local score = redis.pcall('zscore', KEYS[i], id)
	if type(score) ~= 'string' or tonumber(score) <= t then
		out[i] = '0'
	elseif score ~= wrote then
		if score == '922337203685477' then
			out[i] = 'leased:none'
		else
			out[i] = 'leased:' .. string.format('%.0f', tonumber(score) - t)
		end
	else
		local new = string.format('%.0f', t + tonumber(ARGV[1]))
		redis.call('zadd', KEYS[i], new, id)
		out[i] = new
	end
end
return out
