-- tokenpast.lua: a new token for a fenced lock's current holder, past a
-- token a fencing store has seen. It is how a holder recovers when a store
-- refuses the token it drew because Redis lost the counter while its clock
-- (and the drawing client's) stood behind the tokens drawn before: the
-- holder proves it holds the lock now, and its next token outranks the
-- store's, so the store refuses the older holder from then on.
--
-- lock        KEYS[1]: the lock hash N
-- counter     KEYS[2]: the token counter, redisson_lock_token:{N}
-- owner       ARGV[1]: owner field
-- past        ARGV[2]: the token to outrank, digits
-- clock       ARGV[3]: the client's clock in microseconds (tokenlib.lua)
--
-- Reply: {1, token} when owner holds the lock, the token drawn as
-- tokenlib.lua's draw does, above past; the hold's count and TTL are left
-- as they are. {0, 0} when owner does not hold it, changing nothing. A
-- counter that is not an integer fails with WRONGTYPE before anything
-- changes.
local lock, counter = KEYS[1], KEYS[2]
local owner, past, clock = ARGV[1], ARGV[2], ARGV[3]

if redis.call('hexists', lock, owner) == 0 then
	return {0, 0}
end
local refused, draw = tokenLib()
local bad = refused(counter)
if bad then
	return bad
end
local now = redis.call('get', counter)
if not now or tonumber(now) < tonumber(past) then
	-- KEEPTTL: a counter the fenced lock lets expire keeps its TTL.
	redis.call('set', counter, past, 'keepttl')
end
return {1, draw(counter, clock)}
