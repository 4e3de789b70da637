-- readacquire.lua: take the read side of a read-write lock (Redisson's
-- RReadWriteLock), or take it again.
--
-- lock           KEYS[1]: the lock hash N
-- timeoutPrefix  KEYS[2]: this owner's hold-timeout prefix, {N}:<owner>:rwlock_timeout
-- lease          ARGV[1]: lease in milliseconds
-- owner          ARGV[2]: owner field, "<client-id>:<n>"
-- writeField     ARGV[3]: the same owner's write field, "<client-id>:<n>:write"
--
-- A read hold is granted when the lock is free, held for reading, or held
-- for writing by this same owner (a writer may read: downgrade). Each read
-- hold k of an owner gets a STRING timeoutPrefix:k with the lease as its TTL; the
-- hash lives as long as its longest hold.
-- Reply: nil when granted; otherwise the hash's PTTL in milliseconds.

local lock, timeoutPrefix = KEYS[1], KEYS[2]
local lease, owner, writeField = ARGV[1], ARGV[2], ARGV[3]

local mode = redis.call('hget', lock, 'mode')
if mode == false then
	redis.call('hset', lock, 'mode', 'read')
end
if mode == false or mode == 'read' or redis.call('hexists', lock, writeField) == 1 then
	local k = redis.call('hincrby', lock, owner, 1)
	redis.call('set', timeoutPrefix .. ':' .. k, 1, 'px', lease)
	local remain = redis.call('pttl', lock)
	redis.call('pexpire', lock, math.max(remain, tonumber(lease)))
	return nil
end
return redis.call('pttl', lock)
