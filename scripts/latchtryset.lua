-- latchtryset.lua: set a latch's count if it has none.
-- RedissonCountDownLatch.trySetCountAsync, step for step.
--
-- KEYS[1]  the latch N
-- KEYS[2]  its channel
-- ARGV[1]  the count (> 0)
-- ARGV[2]  publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when N was missing and now holds the count, and "1" (a new
-- count: the latch closes) is published; else 0 and nothing changes.
if redis.call('exists', KEYS[1]) == 1 then
	return 0
end
redis.call('set', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], '1') end
return 1
