-- exists.lua: whether a key exists (RedissonObject.isExistsAsync). A
-- script, not EXISTS, for count.lua's reason: rueidis sends a read again
-- and again while the connection is down, until the caller's ctx ends.
--
-- key  KEYS[1]: the key
--
-- Reply: 1 when it exists, else 0.

local key = KEYS[1]

return redis.call('exists', key)
