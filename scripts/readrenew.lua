-- readrenew.lua: extend many read holds in one call (the watchdog's renewal
-- of read-write locks held for reading).
--
-- KEYS[i]    a lock hash; all keys of one call share a cluster slot
-- ttl  ARGV[1]: the new TTL in milliseconds
-- ARGV[i+1]  the owner field that must hold KEYS[i] for reading
--
-- For each lock whose owner field is there, the hash and the owner's own
-- read holds' timeout keys ({N}:<owner>:rwlock_timeout:<k>) get the TTL;
-- other readers' keys are theirs to renew. So a reader whose process died
-- is not kept alive by the live readers' renewals: its keys expire a TTL
-- after its last renewal, and the last live reader's release, which reads
-- the timeout keys left, frees the lock at once (Redisson #1458, fixed the
-- same way by Redisson 4.4's #7098). Reply: one integer per key, 1
-- renewed, 0 the hold is gone (nothing changed).

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
		local holds = tonumber(n)
		if holds ~= nil then
			for k = holds, 1, -1 do
				redis.call('pexpire', prefix .. ':' .. ARGV[i + 1] .. ':rwlock_timeout:' .. k, ttl)
			end
		end
		renewed[i] = 1
	else
		renewed[i] = 0
	end
end
return renewed
