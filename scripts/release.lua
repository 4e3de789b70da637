-- release.lua: give back one hold of a reentrant lock.
--
-- KEYS[1]  the lock hash N
-- KEYS[2]  the lock channel, redisson_lock__channel:{N}
-- KEYS[3]  the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- ARGV[1]  the message published when the lock becomes free: "0", or
--          "00" with directed wakes (Redisson reads both as 0)
-- ARGV[2]  lease in milliseconds, restored on the hash while holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command: "publish", "spublish", or "" to announce
--          nothing (Redisson's spin lock)
-- ARGV[5]  latch TTL in milliseconds
-- ARGV[6]  "1" when this request may have been sent before, so that its
--          latch may hold its reply; "0" for a first send, which skips it
-- ARGV[7]  "1" when the caller believes it has the hold (see
--          Release.Believed): a release that frees the lock writes no latch
-- KEYS[4]  with directed wakes (see wakelib.lua), the waiters' set: a
--          freed lock then also tells the longest-registered relock client,
--          unless no one at all heard the message on KEYS[2]
-- KEYS[5]  with handoffs (a plain lock), the offers' hash
--          relock_grants:{N}: the client told is given the lock when it
--          can be (see handOn in wakelib.lua)
-- ARGV[8]  with KEYS[5], the releasing client's id; the rest only when it
--          listens on KEYS[2] (it waited on the lock lately). ARGV[9] is the owner
--          number of its offer, or "" (it has no waiter that takes
--          handoffs): a release that frees the lock offers it, for lease
--          ARGV[10] ms, keeping the hash ARGV[12] ms; ARGV[11] how many ms
--          at least it will still listen on KEYS[2] (see handOn and leave);
--          ARGV[13] "1" when the client has no waiter left: a release that
--          frees the lock takes it out of the waiters' set (see leave),
--          where a handoff or an attempt may have left it; ARGV[14] "1"
--          when the client may count KEYS[2]'s listeners (PUBSUB NUMSUB):
--          then, listening, it counts them before publishing there, and
--          publishes nothing there when it hands the lock on
--
-- Reply: 1 when that was the last hold (the hash is deleted and ARGV[1] is
-- published, unless ARGV[4] is empty or the lock was handed on); 0 when
-- holds remain (the TTL is reset to the lease); nil when the owner holds
-- nothing, and then nothing is changed.
-- The latch remembers the reply of this request id, so a retried release
-- returns its first reply instead of releasing a second time. With ARGV[7]
-- a release that frees the lock writes none: a retry then finds no hold
-- and answers nil, as for a hold lost meanwhile (see Release.Believed).
if ARGV[6] == '1' then
	local earlier = redis.call('get', KEYS[3])
	if earlier then
		return tonumber(earlier)
	end
end
local count = redis.call('hget', KEYS[1], ARGV[3])
if not count then
	return nil
end
local reply = 0
if tonumber(count) > 1 then
	redis.call('hincrby', KEYS[1], ARGV[3], -1)
	redis.call('pexpire', KEYS[1], ARGV[2])
else -- the last hold: the key goes, so its count needs no update
	redis.call('del', KEYS[1])
	-- Whether the releasing client is counted among Redisson's channel's
	-- listeners (see handOn): read at most once, nil until then.
	local counted
	if ARGV[9] and ARGV[9] ~= '' then
		local score = redis.call('zscore', KEYS[4], ARGV[8])
		-- An offer lives with its client's registration (see drop), and a
		-- registered client is counted; a marked one is read again.
		if score and wakeLib().registered(score) then
			counted = true
			wakeLib().offer(KEYS[5], ARGV[8], ARGV[9], ARGV[10], ARGV[12])
		end
	end
	-- Every relock client that waits for a directed wake listens on
	-- KEYS[2] too, subscribed before its last look at the lock: nobody
	-- there, nobody to tell.
	local releaser = ARGV[11] and ARGV[11] ~= '0' and ARGV[8] or nil
	-- A release by a client that waited on the lock lately most likely
	-- hands it on. It counts KEYS[2]'s listeners before it publishes
	-- there, and a lock handed on is announced to its taker only: on
	-- KEYS[2] the message would wake no one who could take the lock, and
	-- it would delay the taker's (Redis writes every listener's copy as it
	-- writes the taker's: with 64 clients listening, a forced handoff's p50
	-- was 1.6x as long). Other releases publish first, and read PUBLISH's
	-- count: the commonest, uncontended, sends one command fewer so.
	local counts = releaser and ARGV[4] ~= '' and ARGV[14] == '1'
	local heard = counts and wakeLib().subscribers(ARGV[4], KEYS[2])
	if not heard then
		counts = false
		heard = ARGV[4] ~= '' and redis.call(ARGV[4], KEYS[2], ARGV[1]) or 0
	end
	local given = false
	if heard > 0 and ARGV[8] then
		if ARGV[13] == '1' then
			counted = wakeLib().leave(KEYS[4], KEYS[5], ARGV[8], ARGV[11])
		end
		given = wakeLib().handOn(KEYS[1], KEYS[4], KEYS[5], ARGV[4], heard, releaser, counted)
	elseif heard > 0 and KEYS[4] then
		wakeLib().wakeNext(KEYS[4], ARGV[4], KEYS[5])
	end
	if counts and not given then
		redis.call(ARGV[4], KEYS[2], ARGV[1])
	end
	if ARGV[7] == '1' then
		return 1
	end
	reply = 1
end
redis.call('set', KEYS[3], reply, 'px', ARGV[5])
return reply
