-- release.lua: give back one hold of a reentrant lock.
--
-- lock       KEYS[1], the lock hash N
-- channel    KEYS[2], the lock channel, redisson_lock__channel:{N}
-- latch      KEYS[3], the unlock latch, redisson_unlock_latch:{N}:<request-id>
-- message    ARGV[1], published when the lock becomes free: "0", or "00"
--            with directed wakes (Redisson reads both as 0)
-- lease      ARGV[2], ms, restored on the hash while holds remain
-- owner      ARGV[3], the owner field
-- pub        ARGV[4], the publish command: "publish", "spublish", or "" to
--            announce nothing (Redisson's spin lock)
-- latchTTL   ARGV[5], ms
-- again      ARGV[6], "1" when this request may have been sent before, so
--            that its latch may hold its reply; "0" for a first send,
--            which skips it
-- believed   ARGV[7], "1" when the caller believes it has the hold (see
--            Release.Believed): a release that frees the lock writes no
--            latch
-- waiters    KEYS[4], with directed wakes (see wakelib.lua), the waiters'
--            set: a freed lock then also tells the longest-registered
--            relock client, unless no one at all heard the message on
--            channel
-- offers     KEYS[5], with handoffs (a plain lock), the offers' hash
--            relock_grants:{N}: the client told is given the lock when it
--            can be (see handOn in wakelib.lua)
-- client     ARGV[8], with offers, the releasing client's id; the rest
--            only when it listens on channel (it waited on the lock lately)
-- offered    ARGV[9], its offer, "<n>:<last>" (see offer in wakelib.lua),
--            or "" (it has no waiter that takes handoffs, or a release
--            wrote its offer already): a release that frees the lock
--            offers it, for offerLease (ARGV[10]) ms, keeping the hash
--            keep (ARGV[12]) ms
-- listens    ARGV[11], how many ms at least it will still listen on
--            channel (see handOn and leave)
-- leaving    ARGV[13], "1" when the client has no waiter left: a release
--            that frees the lock takes it out of the waiters' set (see
--            leave), where a handoff or an attempt may have left it
-- countsListeners ARGV[14], "1" when the client may count channel's
--            listeners (PUBSUB NUMSUB): then, listening, it counts them
--            before publishing there, and publishes nothing there when it
--            hands the lock on
--
-- Reply: 1 when that was the last hold (the hash is deleted and message is
-- published, unless pub is empty or the lock was handed on); 0 when holds
-- remain (the TTL is reset to the lease); nil when the owner holds
-- nothing, and then nothing is changed.
-- The latch remembers the reply of this request id, so a retried release
-- returns its first reply instead of releasing a second time. With
-- believed a release that frees the lock writes none: a retry then finds
-- no hold and answers nil, as for a hold lost meanwhile (see
-- Release.Believed).
local lock, channel, latch, waiters, offers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local message, lease, owner, pub, latchTTL, again, believed = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local client, offered, offerLease, listens = ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local keep, leaving, countsListeners = ARGV[12], ARGV[13], ARGV[14]

local earlier = latchedReply(latch, again)
if earlier then
	return earlier
end
-- freed announces the freed lock: on channel, and with directed wakes to
-- one relock client, which may be handed the lock.
local function freed()
	-- Whether the releasing client is counted among Redisson's channel's
	-- listeners (see handOn): read at most once, nil until then.
	local counted
	if offered and offered ~= '' then
		local score = redis.call('zscore', waiters, client)
		-- An offer lives with its client's registration (see drop), and a
		-- registered client is counted; a marked one is read again.
		if score and wakeLib().registered(score) then
			counted = true
			wakeLib().offer(offers, client, offered, offerLease, keep)
		end
	end
	-- Every relock client that waits for a directed wake listens on
	-- channel too, subscribed before its last look at the lock: nobody
	-- there, nobody to tell.
	local releaser = listens and listens ~= '0' and client or nil
	-- A release by a client that waited on the lock lately most likely
	-- hands it on. It counts channel's listeners before it publishes
	-- there, and a lock handed on is announced to its taker only: on
	-- channel the message would wake no one who could take the lock, and
	-- it would delay the taker's (Redis writes every listener's copy as it
	-- writes the taker's: with 64 clients listening, a forced handoff's p50
	-- was 1.6x as long). Other releases publish first, and read PUBLISH's
	-- count: the commonest, uncontended, sends one command fewer so.
	local counts = releaser and pub ~= '' and countsListeners == '1'
	local heard = counts and wakeLib().subscribers(pub, channel)
	if not heard then
		counts = false
		heard = pub ~= '' and redis.call(pub, channel, message) or 0
	end
	local given = false
	if heard > 0 and client then
		if leaving == '1' then
			counted = wakeLib().leave(waiters, offers, client, listens)
		end
		given = wakeLib().handOn(lock, waiters, offers, pub, heard, releaser, counted)
	elseif heard > 0 and waiters then
		wakeLib().wakeNext(waiters, pub, offers)
	end
	if counts and not given then
		redis.call(pub, channel, message)
	end
end

local reply = giveBackHold(lock, owner, lease, freed)
if reply == nil or (reply == 1 and believed == '1') then
	return reply
end
latchReply(latch, reply, latchTTL)
return reply
