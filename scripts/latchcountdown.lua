-- latchcountdown.lua: count a latch down by one.
-- RedissonCountDownLatch.countDownAsync, step for step.
--
-- KEYS[1]  the latch N, a string holding the count
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{N}
-- ARGV[1]  publish command: "publish", "spublish", or "" to announce nothing
--
-- At 0 or below the key is deleted; at exactly 0, "0" is published, which
-- opens the latch for every waiter. Reply: the new count.
local v = redis.call('decr', KEYS[1])
if v <= 0 then
	redis.call('del', KEYS[1])
end
if v == 0 then
	if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[2], '0') end
end
return v
