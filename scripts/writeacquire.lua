-- writeacquire.lua: take the write side of a read-write lock, or take it
-- again as its writer.
--
-- lock        KEYS[1]: the lock hash N
-- lease       ARGV[1]: lease in milliseconds
-- writeField  ARGV[2]: the owner's write field, "<client-id>:<n>:write"
--
-- Granted only when the lock is free or already written by this owner; a
-- reader cannot upgrade (it would wait for itself).
-- Reply: nil when granted; otherwise the hash's PTTL in milliseconds.

local lock = KEYS[1]
local lease, writeField = ARGV[1], ARGV[2]

local mode = redis.call('hget', lock, 'mode')
if mode == false then
	redis.call('hset', lock, 'mode', 'write', writeField, 1)
	redis.call('pexpire', lock, lease)
	return nil
end
if mode == 'write' and redis.call('hexists', lock, writeField) == 1 then
	redis.call('hincrby', lock, writeField, 1)
	redis.call('pexpire', lock, math.max(redis.call('pttl', lock), tonumber(lease)))
	return nil
end
return redis.call('pttl', lock)
