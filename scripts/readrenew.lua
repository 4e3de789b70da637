-- readrenew.lua: extend many read holds in one call (the watchdog's renewal
-- of read-write locks held for reading).
--
-- KEYS[i]    a lock hash; all keys of one call share a cluster slot
-- ttl  ARGV[1]: the new TTL in milliseconds
-- ARGV[i+1]  the owner field that must hold KEYS[i] for reading
--
-- For each lock whose owner field is there, the hash and every read hold's
-- timeout key ({N}:<field>:rwlock_timeout:<k>, for every reading owner) get
-- the TTL. Reply: one integer per key, 1 renewed, 0 the hold is gone
-- (nothing changed).

local ttl = ARGV[1]

local renewed = {}
for i = 1, #KEYS do
	local n = redis.pcall('hget', KEYS[i], ARGV[i + 1])
	if type(n) == 'string' then
		local prefix = KEYS[i]
		if not string.find(prefix, '{', 1, true) then
			prefix = '{' .. prefix .. '}'
		end
		redis.call('pexpire', KEYS[i], ttl)
		for _, field in ipairs(redis.call('hkeys', KEYS[i])) do
			local holds = tonumber(redis.call('hget', KEYS[i], field))
			if holds ~= nil then
				for k = holds, 1, -1 do
					redis.call('pexpire', prefix .. ':' .. field .. ':rwlock_timeout:' .. k, ttl)
				end
			end
		end
		renewed[i] = 1
	else
		renewed[i] = 0
	end
end
return renewed
