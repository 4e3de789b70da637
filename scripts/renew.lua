-- renew.lua: extend many held locks in one call (the watchdog's renewal).
--
-- KEYS[i]    a lock hash; all keys of one call share a cluster slot
-- ttl  ARGV[1]: the new TTL in milliseconds
-- ARGV[i+1]  the owner field that must hold KEYS[i]
--
-- Reply: an array with one integer per key: 1 when the owner's field was
-- there and the TTL is now ttl; 0 when it was not (the key is gone, has
-- another owner, or is not a hash). A 0 changes nothing: a renewal never
-- extends another owner's lock and never re-creates a vanished one.

local ttl = ARGV[1]

local renewed = {}
for i = 1, #KEYS do
	local present = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
	if present == 1 then
		redis.call('pexpire', KEYS[i], ttl)
		renewed[i] = 1
	else
		renewed[i] = 0
	end
end
return renewed
