-- leaserecord.lua: a leader election record kept for an elector that
-- decides on its own clock who leads (client-go's leaderelection): the
-- record as the elector wrote it, a version that every write raises, so
-- that a write can be made only over the version its writer last saw
-- (compare-and-set, as an API server's resourceVersion), and the fenced
-- term of the holder it names.
--
-- record   KEYS[1]: relock_lease:{N}, a hash: record (the elector's record,
--          opaque here), version, holder, term
-- counter  KEYS[2]: redisson_lock_token:{N}, the fenced lock's token
--          counter: terms come from it, so they only grow, across this
--          record, the fenced lock and an election on the same name
-- op       ARGV[1]: "get", "create" or "update"
-- with create and update:
-- text     ARGV[2]: the record to write
-- holder   ARGV[3]: the holder it names ("" for none: a release)
-- with update:
-- seen     ARGV[4]: the version the writer last saw
-- counted  ARGV[5]: the leader transitions the writer counted
--
-- A write that names a holder draws a new term when the holder changes, or
-- when the writer counted a transition past the term on record (the same
-- holder leads anew after its lease lapsed: a restarted process with the
-- same identity); a renewal keeps its term. A release keeps the last term,
-- as the record of who led last.
--
-- Reply: get: {record or false, version, term} ({false, 0, 0} when there
-- is no record). create: {1, version, term}, or {0} when a record exists.
-- update: {1, version, term}; {0, version} when the version is not the one
-- seen (another wrote first); {-1} when there is no record. Nothing
-- changes unless the first element is 1. A key of another type, a hash
-- that is not a lease record (a field of another's, no record or version,
-- a version or term that is not an integer), or, for a write, a counter
-- that is not an integer, fails with a WRONGTYPE reply before anything
-- changes.
local key, counter = KEYS[1], KEYS[2]
local op, text, holder, seen, counted = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local kind = redis.call('type', key)['ok']
if kind ~= 'none' and kind ~= 'hash' then
	return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ', where a lease record belongs')
end
local old = redis.call('hmget', key, 'record', 'version', 'holder', 'term')
if kind == 'hash' then
	local ours = {record = true, version = true, holder = true, term = true}
	local fine = old[1] and old[2] and string.match(old[2], '^%d+$') and (not old[4] or string.match(old[4], '^%d+$'))
	for _, field in ipairs(redis.call('hkeys', key)) do
		fine = fine and ours[field]
	end
	if not fine then
		return redis.error_reply('WRONGTYPE ' .. key .. ' holds a hash that is not a lease record')
	end
end
if op == 'get' then
	return {old[1] or false, tonumber(old[2] or '0'), tonumber(old[4] or '0')}
end
local refused, draw = tokenLib()
local bad = refused(counter)
if bad then
	return bad
end
local exists = old[2] ~= false
if op == 'create' and exists then
	return {0}
end
if op == 'update' then
	if not exists then
		return {-1}
	end
	if old[2] ~= seen then
		return {0, tonumber(old[2])}
	end
end

local term = tonumber(old[4] or '0')
if holder ~= '' and (holder ~= old[3] or tonumber(counted or '0') > term) then
	term = draw(counter, nil)
	redis.call('persist', counter)
end
local version = tonumber(old[2] or '0') + 1
redis.call('hset', key, 'record', text, 'version', version, 'holder', holder, 'term', term)
return {1, version, term}
