-- groupforceunlock.lua: free a group lock's values whoever holds them
-- (RedissonFasterMultiLock.forceUnlockAsync). See grouplib.lua.
--
-- group    KEYS[1]: the group's hash G
-- channel  KEYS[2]: the lock channel, redisson_lock__channel:{G}
-- message  ARGV[1]: the message to publish: "0"
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" for none
-- ARGV[3..] the values' fields
--
-- Reply: how many of the values had a holder. Each value's holder field
-- and that holder's expire_time and lock_count go. The message is
-- published whatever was found, as Redisson's is (whose script fails on a
-- value nobody holds; this one skips it).

local group, channel = KEYS[1], KEYS[2]
local message, pub = ARGV[1], ARGV[2]

local g = group
local freed = 0
for i = 3, #ARGV do
	local holder = redis.call('hget', g, ARGV[i])
	if holder then
		redis.call('hdel', g, ARGV[i], expireField(ARGV[i], holder), countField(ARGV[i], holder))
		freed = freed + 1
	end
end
if pub ~= '' then
	redis.call(pub, channel, message)
end
return freed
