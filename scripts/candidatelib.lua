-- candidatelib.lua: an election's candidates (package reentrant/election).
-- A candidate stands in two keys of the election's slot: its entry in the
-- roll, HASH relock_election_candidates:{N} (owner ->
-- "<since ms>:<registration>:<value>"), and its registration,
-- relock_election_candidate:{N}:<registration>, a plain lock held by the
-- owner <registration>, new for each Campaign, which the candidate's
-- watchdog renews as every hold. An entry counts only while its
-- registration is held: a candidate whose process died leaves the list
-- when its registration's TTL runs out, with nobody writing anything.
-- Entries without one are pruned when a candidate stands or leaves. Each
-- Campaign has a registration of its own, so a Campaign of an owner that
-- begins as its last one leaves cannot be taken for it.
--
-- candidateLib() makes the functions:
--   parse(entry)           since, registration, value of a roll entry
--   held(prefix, reg)      the registration's PTTL if it is held, else nil
--   live(roll, prefix, owner)  the PTTL of owner's registration if owner
--                          stands, else nil
--   standing(roll, prefix) the live candidates, oldest first, each
--                          {owner, since, value, pttl}
--   prune(roll, prefix)    takes the entries of dead candidates out
--   drop(roll, owner, reg) takes owner's entry out if it is registration
--                          reg's (a later Campaign's stays); true if it was
local function candidateLib()
	local function parse(entry)
		local since, reg, value = string.match(entry, '^(%d+):([^:]*:[^:]*):(.*)$')
		return since or '0', reg or '', value or ''
	end
	local function held(prefix, reg)
		if reg == '' or redis.call('hexists', prefix .. reg, reg) == 0 then
			return nil
		end
		return redis.call('pttl', prefix .. reg)
	end
	local function regOf(roll, owner)
		local entry = redis.call('hget', roll, owner)
		if not entry then
			return nil
		end
		local _, reg = parse(entry)
		return reg
	end
	local function live(roll, prefix, owner)
		local reg = regOf(roll, owner)
		if not reg then
			return nil
		end
		return held(prefix, reg)
	end
	local function standing(roll, prefix)
		local all = redis.call('hgetall', roll)
		local out = {}
		for i = 1, #all, 2 do
			local since, reg, value = parse(all[i + 1])
			local pttl = held(prefix, reg)
			if pttl then
				out[#out + 1] = {all[i], since, value, pttl}
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
		local all = redis.call('hgetall', roll)
		for i = 1, #all, 2 do
			local _, reg = parse(all[i + 1])
			if not held(prefix, reg) then
				redis.call('hdel', roll, all[i])
			end
		end
	end
	local function drop(roll, owner, reg)
		if regOf(roll, owner) ~= reg then
			return false
		end
		redis.call('hdel', roll, owner)
		return true
	end
	return {parse = parse, held = held, live = live, standing = standing, prune = prune, drop = drop}
end
