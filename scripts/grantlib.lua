-- grantlib.lua: the grants shared by the fair and the priority lock
-- (fairlib.lua, prioritylib.lua), relock's own: a queued relock waiter
-- that takes grants records when the lease its last attempt asked for
-- ends (by, ms of Redis's clock) and that attempt's number (try), in a
-- hash of marks (the fair lock's relock_grants:{N}, the priority lock's
-- waiter records), where "0" marks a grant given and not yet taken.
-- Each queue keeps its own order and its own way of giving the lock
-- (give); what a grant is, and how it is taken, are the same.

-- grantTo gives the free lock to head, the head of the queue, told on
-- channel, when it takes grants and the lease of its last attempt has not
-- ended at t (by > t; it is most likely alive): give(head, lease) makes it
-- the holder, its mark becomes "0", and it is told "2:<try>", naming the
-- attempt the grant answers, so that its wait ends on the message, with
-- no attempt. The lock's TTL runs to the end of that lease: the waiter's
-- own clock counts it from before the attempt was sent, so it never
-- believes in more than Redis keeps, and a head that takes the lock and
-- then stalls holds it no longer than if it had taken it with that
-- attempt. Any other head (a Java waiter, one that takes no grants, one
-- whose lease has ended) is told message, and tries, as Redisson's
-- waiters do. The "2:" message goes out only with a grant, so a waiter
-- can trust it whoever counts the subscribers; a head that does not hear
-- it (it subscribes after its attempt, or the message was lost) takes the
-- grant with its next attempt (see claimGrant). It returns the grant's
-- lease, or nil when there was none.
local function grantTo(publish, channel, head, by, try, t, message, give, marks)
	if not by or by <= t then
		redis.call(publish, channel, message)
		return nil
	end
	local lease = by - t
	redis.call(publish, channel, '2:' .. try)
	give(head, lease)
	redis.call('hset', marks, head, '0')
	return lease
end

-- claimGrant ends the wait of owner, which takes grants, if it holds lock
-- already: a release granted it the lock while it was not listening
-- or its message was lost, or an attempt of its own whose reply was lost
-- took it (the owner is made for one call, so no other hold of it can be
-- here). That hold is the call's one hold, now with a lease of lease ms.
-- It reports whether there was one. A grant whose hold is gone (its turn
-- ran out, its lock was deleted or expired) is forgotten, and the waiter
-- queues again as its queue's rules say (the commands HEXISTS of the lock
-- then HDEL of the mark say so, for a reader of MONITOR).
local function claimGrant(lock, marks, owner, lease)
	local granted = redis.call('hget', marks, owner) == '0'
	if redis.call('hexists', lock, owner) == 0 then
		if granted then
			redis.call('hdel', marks, owner)
		end
		return false
	end
	redis.call('pexpire', lock, lease)
	if granted then
		redis.call('hdel', marks, owner)
	end
	return true
end
