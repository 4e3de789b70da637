-- guard.lua: the prologue of an acquire attempt its caller may give up on
-- while it is in flight (a plain or non-reentrant lock's, for an owner made
-- for the call): it runs before the acquire script's own lines, and takes
-- its key off the front of KEYS, so that they read their keys as ever.
--
-- guard    KEYS[1], relock_abandoned:{N}:<owner>: set (Abandon) once the
--          caller gave up on the attempt, before what the attempt may have
--          taken is given back
--
-- Reply: -4, changing nothing, when guard is set: this attempt comes after
-- its caller gave up on it (it went out on another connection than the
-- undo, and was overtaken). Else the acquire script's.

local guard = table.remove(KEYS, 1)
if redis.call('exists', guard) == 1 then
	return -4
end
