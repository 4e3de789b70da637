-- latchtryset.lua: set a latch's count if it has none.
-- RedissonCountDownLatch.trySetCountAsync, step for step.
--
-- latch    KEYS[1]: the latch N
-- channel  KEYS[2]: its channel
-- count    ARGV[1]: the count (> 0)
-- pub      ARGV[2]: publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when N was missing and now holds the count, and "1" (a new
-- count: the latch closes) is published; else 0 and nothing changes.

local latch, channel = KEYS[1], KEYS[2]
local count, pub = ARGV[1], ARGV[2]

if redis.call('exists', latch) == 1 then
	return 0
end
redis.call('set', latch, count)
if pub ~= '' then redis.call(pub, channel, '1') end
return 1
