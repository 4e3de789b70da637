-- guard.lua: the prologue of an acquire attempt its caller may give up on
-- while it is in flight (a plain or non-reentrant lock's, for an owner made
-- for the call): it runs before the acquire script's own lines, and takes
-- its key off the front of KEYS, so that they read their keys as ever.
--
-- guard    KEYS[1], relock_abandoned:{N}:<owner>: set (Abandon) once the
--          caller gave up on the attempt, before what the attempt may have
--          taken is given back
--
-- Reply: -4, changing nothing, when guard is set and the attempt would
-- take the lock, or write its client's offer: this attempt comes after its
-- caller gave up on it (it went out on another connection than the undo,
-- and was overtaken). Else the acquire script's. An attempt that finds the
-- lock held and only registers its client does so unguarded, one command
-- fewer for every waiter: a client registered with no waiter costs the
-- release that tells it a wake, which the client passes on, or, if nobody
-- hears it there, a drop (see serveHead in wakelib.lua).

local guard = table.remove(KEYS, 1)

-- abandoned reports whether the caller gave up on this attempt. The
-- acquire script asks before it takes the lock or writes an offer.
local function abandoned()
	return redis.call('exists', guard) == 1
end
