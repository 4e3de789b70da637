-- wakelib.lua: directed wakes, relock's own addition to a plain or fenced
-- lock (see docs/waiting.md). Relock clients that wait on lock N register
-- in the sorted set relock_waiters:{N} (member: the client's id, score: when
-- it first registered, on the server's clock), and each listens on its own
-- channel relock_wake:{N}:<client-id>. A release still publishes "0" on
-- Redisson's channel, for Java waiters, and tells one relock client more.
-- Prepended to the scripts that use it.
--
-- A client that stops waiting keeps listening on Redisson's channel a
-- while (its subscription lingers, a second at most). Where it says how
-- long (a plain lock's scripts), it stays in the set as a mark, scored
-- MARKS minus when it stops listening (ms): above every registration
-- (scores below REAL, a time in ms, until the year 2286), so no release
-- serves it, and a release that counts who may hear it counts it until
-- then (see handOn).
local REAL, MARKS = 10000000000000, 30000000000000
local BELOW_REAL = '(10000000000000' -- for ZCOUNT and ZRANGEBYSCORE
--
-- A script gets the functions below from wakeLib(), which makes them the
-- first time it is called: making them costs Redis a closure each, about
-- 0.7 microseconds per script call in all, which the commonest calls (a
-- lock taken at once, a release that nobody waits for) use none of.

local wakeFns
local function wakeLib()
	if wakeFns then
		return wakeFns
	end

	-- written holds the registrations and offers this script has written
	-- (register, offer), each as what it wrote: many.lua runs a client's
	-- attempts in one script, and each that fails would write the same
	-- registration and offer again. Within one script Redis's clock stands
	-- still (clockLib reads TIME once, and Redis 7 freezes expiry times),
	-- so the same write again changes nothing, and is not made. Anything
	-- else that writes the set or the offers (forget) clears it all.
	local written = {}
	local function forget()
		written = {}
	end
	-- again reports whether what says the same as the last write of key,
	-- and records it.
	local function again(key, what)
		if written[key] == what then
			return true
		end
		written[key] = what
		return false
	end

	-- drop takes client out of the waiters' set, and, with grants (a plain
	-- lock's offers' hash, relock_grants:{N}, see handOn), its offer: a
	-- client's offer lives as long as its registration.
	local function drop(waiters, grants, client)
		forget()
		redis.call('zrem', waiters, client)
		if grants then
			redis.call('hdel', grants, client)
		end
	end

	-- serveHead serves the longest-registered relock client: tell(channel,
	-- client) says whether it was heard on its channel, relock_wake:{N}:<id>,
	-- named after the waiters' set relock_waiters:{N}. A client that nobody
	-- hears on (it stopped waiting, or died) is dropped, with its offer when
	-- grants is given, and the next one is served, a few at most: the rest
	-- are reached by their re-polls.
	local function serveHead(waiters, grants, tell)
		local prefix = 'relock_wake' .. string.sub(waiters, 15) .. ':'
		for _ = 1, 8 do
			local head = redis.call('zrangebyscore', waiters, '-inf', BELOW_REAL, 'LIMIT', 0, 1)[1]
			if head == nil or tell(prefix .. head, head) then
				return
			end
			drop(waiters, grants, head)
		end
	end

	-- wakeNext tells the longest-registered relock client that the lock is
	-- free: "0" on its channel.
	local function wakeNext(waiters, pub, grants)
		serveHead(waiters, grants, function(channel)
			return redis.call(pub, channel, '0') > 0
		end)
	end

	local nowMs, nowSubMs = clockLib()

	-- nowPlace is nowMs with its microseconds as a fraction: the score that
	-- orders the waiters' set. Clients moved within one millisecond would
	-- tie at whole ones, and Redis orders a tie by member: the same client
	-- would come first every time (a crowd drained one client's waiters
	-- before the others').
	local function nowPlace()
		return string.format('%d.%03d', nowMs(), nowSubMs())
	end

	-- register puts client in the waiters' set, at its end if it is not there
	-- yet (LT: a mark scores above any registration, and is replaced), and
	-- keeps the set alive for ttl ms more: every waiting client tries again
	-- well within that.
	local function register(waiters, client, ttl)
		if again(waiters .. '\0' .. client, ttl) then
			return
		end
		redis.call('zadd', waiters, 'LT', nowPlace(), client)
		redis.call('pexpire', waiters, ttl)
	end

	-- leave takes client out of the waiters' set, with its offer when grants
	-- is given, as it stops waiting. With listens, how many ms it will still
	-- listen on Redisson's channel, more than 0, it is marked until then;
	-- once no client is registered, the set goes, marks and all: the marks
	-- are counted only beside registrations. It returns whether client is
	-- marked.
	local function leave(waiters, grants, client, listens)
		forget()
		local ms = tonumber(listens)
		if not (ms and ms > 0) then
			drop(waiters, grants, client)
			return false
		end
		redis.call('zadd', waiters, string.format('%d', MARKS - nowMs() - ms), client)
		if grants then
			redis.call('hdel', grants, client)
		end
		if redis.call('zcount', waiters, '-inf', BELOW_REAL) == 0 then
			redis.call('del', waiters)
			return false
		end
		return true
	end

	-- settle updates client's registration after it took the lock: "1" takes
	-- it out (see leave: listens, with grants), "2" puts it at the end (it
	-- has other waiters), "0" leaves it. A client put back after it was
	-- dropped (by a wake it could not hear yet: see pubsub.Waiter.Recheck)
	-- keeps the set alive for ttl ms, as register.
	local function settle(waiters, client, how, ttl, grants, listens)
		forget()
		if how == '1' then
			leave(waiters, grants, client, listens)
		elseif how == '2' then
			if redis.call('zadd', waiters, nowPlace(), client) == 1 and ttl ~= '0' then
				redis.call('pexpire', waiters, ttl)
			end
		end
	end

	-- Handoffs: a plain lock's release gives the lock to the longest-registered
	-- relock client instead of telling it (see docs/waiting.md). A client
	-- whose waiters take handoffs offers, in the hash relock_grants:{N} (field:
	-- the client's id), "<n>:<by>:<last>": owners "<client>:<n>" to
	-- "<client>:<last>", owner numbers the client made for it, may be given
	-- the lock, one after another, until by (ms, server clock), the end of
	-- the lease the offer asked for. A release that gives n moves the offer
	-- on to n + 1, or, n being the last, marks it "<n>:0", used up; so the
	-- client's next release need not write a new one. An offer never
	-- replaces a higher number, or its own number given, so that no owner is
	-- given the lock twice while the client stays registered. A client
	-- dropped from the set loses its offer too (see drop); a late write of a
	-- number given before that, from an attempt held up on the way past the
	-- drop, could then have it given again, to nobody: the lock would stand
	-- until that offer's lease ran out. (An offer written before offers held
	-- several numbers, "<n>:<by>", has n alone.)

	-- parseOffer reads a record of the offers' hash: its next number, its
	-- end (ms) and its last number; nil when rec is none.
	local function parseOffer(rec)
		local n, by, last = string.match(rec or '', '^(%d+):(%d+):?(%d*)$')
		if last == '' then
			last = n
		end
		return n, by, last
	end

	-- offer records client's offer (an argument "<n>:<last>": owner numbers
	-- n to last), for lease ms from now, unless n or a higher number is
	-- recorded (given, withdrawn, or standing: the client counts its lease
	-- from before its first write of the offer, so a later one need not
	-- extend it). The hash lives keep ms more, as the waiters' set does.
	local function offer(grants, client, o, lease, keep)
		if again(grants .. '\0' .. client, o .. ':' .. lease .. ':' .. keep) then
			return
		end
		local n, last = string.match(o, '^(%d+):(%d+)$')
		local old = parseOffer(redis.call('hget', grants, client))
		if not (old and tonumber(old) >= tonumber(n)) then
			redis.call('hset', grants, client, n .. ':' .. (nowMs() + tonumber(lease)) .. ':' .. last)
		end
		redis.call('pexpire', grants, keep)
	end

	-- withdraw takes client's offer o ("<n>:<last>") back: it is marked
	-- used up, unless a later offer is recorded, or none.
	local function withdraw(grants, client, o)
		forget()
		local last = string.match(o, ':(%d+)$')
		local old = parseOffer(redis.call('hget', grants, client))
		if old and tonumber(old) <= tonumber(last) then
			redis.call('hset', grants, client, last .. ':0')
		end
	end

	-- registered says whether score, a client's in the waiters' set, is a
	-- registration (not a mark).
	local function registered(score)
		return tonumber(score) < REAL
	end

	-- counted returns whether client is counted among those who may hear
	-- Redisson's channel: registered, or marked as listening still.
	local function counted(waiters, client)
		local score = redis.call('zscore', waiters, client)
		return score and (registered(score) or tonumber(score) <= MARKS - nowMs()) or false
	end

	-- handOn follows a release that freed lock, whose message on Redisson's
	-- channel heard listeners hear (or heard), one of them perhaps the
	-- releasing client, releaser (its id when it listens there, else nil;
	-- isCounted: whether it is counted, see counted, nil if the script has
	-- not read it). The longest-registered relock client is given the lock,
	-- as owner "<client>:<n>", n its offer's next number (the offer moves
	-- on), with what is left of the offer's lease as the lock's TTL, and
	-- told "2:<n>" on its wake channel; it moves to the end of the set. That is done only when no listener can
	-- be a Java waiter (every relock client registered listens on Redisson's
	-- channel, and every one marked, so heard is no more than those, and one
	-- more for releaser if it is not counted): a Java waiter that woke on the
	-- message would find the lock taken every time. Otherwise, or for a
	-- client with no offer left, it is wakeNext. A client nobody hears on is
	-- dropped with its offer (the grant undone), and the next one is served.
	-- It returns whether it gave the lock.
	local function handOn(lock, waiters, grants, pub, heard, releaser, isCounted)
		forget()
		local more = 0
		if releaser then
			if isCounted == nil then
				isCounted = counted(waiters, releaser)
			end
			if not isCounted then
				more = 1 -- it hears its own message, and is not counted
			end
		end
		local listening = redis.call('zcount', waiters, '-inf', string.format('%d', MARKS - nowMs()))
		if heard > listening + more then
			wakeNext(waiters, pub, grants)
			return false
		end
		local given = false
		serveHead(waiters, grants, function(channel, head)
			local n, by, last = parseOffer(redis.call('hget', grants, head))
			local now = nowMs()
			local left = by and tonumber(by) - now or 0
			if left <= 0 then
				return redis.call(pub, channel, '0') > 0
			end
			-- The hash's TTL is set once the grant is heard: a grant
			-- nobody heard is taken back by a DEL right after the HSET,
			-- which a keyspace notification watcher reads as a release.
			redis.call('hset', lock, head .. ':' .. n, 1)
			if redis.call(pub, channel, '2:' .. n) > 0 then
				redis.call('pexpire', lock, left)
				if tonumber(n) < tonumber(last) then
					redis.call('hset', grants, head, string.format('%d:%s:%s', tonumber(n) + 1, by, last))
				else
					redis.call('hset', grants, head, n .. ':0')
				end
				redis.call('zadd', waiters, nowPlace(), head)
				given = true
				return true
			end
			redis.call('del', lock)
			return false
		end)
		return given
	end

	-- subscribers returns how many listen on channel, as PUBLISH (pub) there
	-- would count them, patterns apart; nil when the server refuses to say
	-- (an ACL user refused PUBSUB NUMSUB, which New could not ask about:
	-- the script has deleted the lock already, and must not fail now).
	local function subscribers(pub, channel)
		local numsub = pub == 'spublish' and 'shardnumsub' or 'numsub'
		local r = redis.pcall('pubsub', numsub, channel)
		if type(r) ~= 'table' or r.err then
			return nil
		end
		return r[2]
	end

	wakeFns = {drop = drop, leave = leave, wakeNext = wakeNext, register = register,
		settle = settle, offer = offer, withdraw = withdraw, registered = registered, counted = counted, handOn = handOn,
		subscribers = subscribers}
	return wakeFns
end
