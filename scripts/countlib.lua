-- countlib.lua: prepended to the scripts of the synchronizers that keep a
-- count in the string key KEYS[1] (semaphores, latches). A key that holds
-- anything else (a user's hash, a string that is not an integer) fails the
-- script before its body runs, so nothing changes, with a WRONGTYPE reply
-- that names what the key holds; the Go side makes it ErrWrongType.
do
	local held = redis.pcall('get', KEYS[1])
	if type(held) == 'table' then
		return redis.error_reply('WRONGTYPE the key holds a ' .. redis.call('type', KEYS[1])['ok'] .. ', where a count belongs')
	end
	if held ~= false and not string.match(held, '^%-?%d+$') then
		return redis.error_reply('WRONGTYPE the key holds a string that is not an integer, where a count belongs')
	end
end
