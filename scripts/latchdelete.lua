-- latchdelete.lua: delete a latch. RedissonCountDownLatch.deleteAsync.
--
-- latch    KEYS[1]: the latch N
-- channel  KEYS[2]: its channel
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when N existed, and "1" is published; else 0.

local latch, channel = KEYS[1], KEYS[2]
local pub = ARGV[1]

if redis.call('del', latch) == 1 then
	if pub ~= '' then redis.call(pub, channel, '1') end
	return 1
end
return 0
