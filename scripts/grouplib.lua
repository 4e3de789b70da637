-- grouplib.lua: a group lock's layout, Redisson's RedissonFasterMultiLock
-- (getMultiLock(group, values)): one hash G per group, and for each value
-- field f (see scripts.GroupField) held by owner o the fields
--   f                  -> o
--   f:o:expire_time    -> when o's hold of f ends, Unix ms
--   f:o:lock_count     -> o's hold count of f
-- A value is held while its holder's expire_time is in the future: the
-- hash's TTL bounds them all but decides nothing. Prepended to the scripts
-- that use it.
--
-- relock's scripts read the time from the server, where Redisson's pass
-- the calling client's clock: relock clients then agree on when a hold
-- ends whatever their clocks say, and a Java client compares with its own
-- clock as it does against another Java client.

local nowMs, nowSubMs, nowMicros = clockLib()

local function expireField(f, owner)
	return f .. ':' .. owner .. ':expire_time'
end

local function countField(f, owner)
	return f .. ':' .. owner .. ':lock_count'
end

-- heldUntil returns when owner's hold of value field f ends, or nil when
-- owner does not hold f: f names another holder or none, or owner's hold
-- has ended (at now, as Redisson's release reads it: a hold ending at now
-- is still held).
local function heldUntil(g, f, owner, now)
	if redis.call('hget', g, f) ~= owner then
		return nil
	end
	local e = tonumber(redis.call('hget', g, expireField(f, owner)))
	if e == nil or e < now then
		return nil
	end
	return e
end

-- valueChannel is relock's channel for value field f of the group whose
-- Redisson lock channel is lockChannel ("redisson_lock__channel" and
-- the group's tagged name): relock_group:{G}:f, in the group's slot.
local function valueChannel(lockChannel, f)
	return 'relock_group' .. string.sub(lockChannel, 23) .. ':' .. f
end

-- extend makes the hash live at least lease ms more.
local function extend(g, lease)
	local pttl = redis.call('pttl', g)
	if pttl >= 0 and pttl < lease then
		redis.call('pexpire', g, lease)
	end
end
