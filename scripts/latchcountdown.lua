-- latchcountdown.lua: count a latch down by one.
-- RedissonCountDownLatch.countDownAsync, step for step.
--
-- latch    KEYS[1]: the latch N, a string holding the count
-- channel  KEYS[2]: its channel, redisson_countdownlatch__channel__{N}
-- pub      ARGV[1]: publish command: "publish", "spublish", or "" to announce nothing
--
-- At 0 or below the key is deleted; at exactly 0, "0" is published, which
-- opens the latch for every waiter. Reply: the new count.

local latch, channel = KEYS[1], KEYS[2]
local pub = ARGV[1]

local v = redis.call('decr', latch)
if v <= 0 then
	redis.call('del', latch)
end
if v == 0 then
	if pub ~= '' then redis.call(pub, channel, '0') end
end
return v
