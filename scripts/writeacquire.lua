-- writeacquire.lua: take the write side of a read-write lock, or take it
-- again as its writer.
--
-- KEYS[1]  the lock hash N
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner's write field, "<client-id>:<n>:write"
--
-- Granted only when the lock is free or already written by this owner; a
-- reader cannot upgrade (it would wait for itself).
-- Reply: nil when granted; otherwise the hash's PTTL in milliseconds.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
	redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
	redis.call('pexpire', KEYS[1], ARGV[1])
	return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
	redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
	return nil
end
return redis.call('pttl', KEYS[1])
