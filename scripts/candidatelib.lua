-- candidatelib.lua: an election's candidates (package reentrant/election).
-- A candidate stands in two keys of the election's slot: its entry in the
-- roll, HASH relock_election_candidates:{N} (owner -> "<since ms>:<value>"),
-- and its registration, relock_election_candidate:{N}:<owner>, a plain
-- lock the candidate holds with its owner and its watchdog renews as every
-- hold. An entry counts only while its registration is held: a candidate
-- whose process died leaves the list when its registration's TTL runs out,
-- with nobody writing anything. Entries without one are pruned when a
-- candidate stands or leaves.
--
-- candidateLib() makes the functions:
--   live(prefix, owner)    the registration's PTTL if owner holds it, else nil
--   standing(roll, prefix) the live candidates, oldest first, each
--                          {owner, since, value, pttl}
--   prune(roll, prefix)    takes the entries of dead candidates out
local function candidateLib()
	local function live(prefix, owner)
		local key = prefix .. owner
		if redis.call('hexists', key, owner) == 0 then
			return nil
		end
		return redis.call('pttl', key)
	end
	local function standing(roll, prefix)
		local all = redis.call('hgetall', roll)
		local out = {}
		for i = 1, #all, 2 do
			local pttl = live(prefix, all[i])
			if pttl then
				local since, value = string.match(all[i + 1], '^(%d+):(.*)$')
				out[#out + 1] = {all[i], since or '0', value or '', pttl}
			end
		end
		table.sort(out, function(a, b)
			local x, y = tonumber(a[2]), tonumber(b[2])
			if x ~= y then
				return x < y
			end
			return a[1] < b[1]
		end)
		return out
	end
	local function prune(roll, prefix)
		local owners = redis.call('hkeys', roll)
		for _, owner in ipairs(owners) do
			if not live(prefix, owner) then
				redis.call('hdel', roll, owner)
			end
		end
	end
	return {live = live, standing = standing, prune = prune}
end
