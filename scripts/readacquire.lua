-- readacquire.lua: take the read side of a read-write lock (Redisson's
-- RReadWriteLock), or take it again.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  this owner's hold-timeout prefix, {N}:<owner>:rwlock_timeout
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client-id>:<n>"
-- ARGV[3]  the same owner's write field, "<client-id>:<n>:write"
--
-- A read hold is granted when the lock is free, held for reading, or held
-- for writing by this same owner (a writer may read: downgrade). Each read
-- hold k of an owner gets a STRING KEYS[2]:k with the lease as its TTL; the
-- hash lives as long as its longest hold.
-- Reply: nil when granted; otherwise the hash's PTTL in milliseconds.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
	redis.call('hset', KEYS[1], 'mode', 'read')
end
if mode == false or mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
	local k = redis.call('hincrby', KEYS[1], ARGV[2], 1)
	redis.call('set', KEYS[2] .. ':' .. k, 1, 'px', ARGV[1])
	local remain = redis.call('pttl', KEYS[1])
	redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
	return nil
end
return redis.call('pttl', KEYS[1])
