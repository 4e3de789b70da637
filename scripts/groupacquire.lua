-- groupacquire.lua: take every value of a group lock at once, or take them
-- again as their owner (RedissonFasterMultiLock.tryLockInnerAsync). See
-- grouplib.lua for the layout.
--
-- KEYS[1]  the group's hash G
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner, "<client-id>:<n>"
-- ARGV[3..] the values' fields, each once
--
-- Reply: nil when owner now holds every value (one hold more of each, each
-- ending no sooner than now + lease); otherwise, and then nothing changed,
-- {ms, f}: how many ms remain until the last of the other holders' holds
-- among them ends (Redisson's reply: the longest wait that can be needed),
-- and the field f of that value, whose release a relock waiter listens
-- for (see grouprelease.lua).
--
-- Where Redisson and relock differ, Java clients see no difference:
-- - A value whose holder's hold ended is taken over, and that holder's
--   expire_time and lock_count go with it (Redisson leaves them until the
--   hash expires). The old holder's release finds nothing either way.
-- - An owner whose own hold of a value ended starts a new count at 1
--   (Redisson adds to the old count, so one release would not free it).
local g, lease, owner = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local now = nowMs()
local existed = redis.call('exists', g) == 1
local holders = {}
local wait, blocker = 0, nil
if existed then
	for i = 3, #ARGV do
		local holder = redis.call('hget', g, ARGV[i])
		holders[i] = holder
		if holder and holder ~= owner then
			local e = tonumber(redis.call('hget', g, expireField(ARGV[i], holder)))
			if e and e - now > wait then
				wait, blocker = e - now, ARGV[i]
			end
		end
	end
end
if wait > 0 then
	return {wait, blocker}
end
local ends = now + lease
for i = 3, #ARGV do
	local f, holder = ARGV[i], holders[i]
	local ef, cf = expireField(f, owner), countField(f, owner)
	local e = nil
	if holder == owner then
		e = tonumber(redis.call('hget', g, ef))
	elseif holder then
		redis.call('hdel', g, expireField(f, holder), countField(f, holder))
	end
	redis.call('hset', g, f, owner)
	if e and e >= now then
		redis.call('hincrby', g, cf, 1)
	else
		redis.call('hset', g, cf, 1)
	end
	if not e or e < ends then
		redis.call('hset', g, ef, ends)
	end
end
if existed then
	extend(g, lease)
else
	redis.call('pexpire', g, lease)
end
return nil
