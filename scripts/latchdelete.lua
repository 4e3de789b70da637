-- latchdelete.lua: delete a latch. RedissonCountDownLatch.deleteAsync.
--
-- KEYS[1]  the latch N
-- KEYS[2]  its channel
-- ARGV[1]  publish command: "publish", "spublish", or "" to announce nothing
--
-- Reply: 1 when N existed, and "1" is published; else 0.
if redis.call('del', KEYS[1]) == 1 then
	if ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[2], '1') end
	return 1
end
return 0
