-- ratelib.lua: shared by every rate limiter script (RedissonRateLimiter);
-- prepended to each body, it defines functions and checks N's type (at
-- its end). Each script has the same keys:
--
-- configKey         KEYS[1]: the configuration hash N: rate, interval (ms), type (0 OVERALL,
--          1 PER_CLIENT), keepAliveTime (ms)
-- valueKey          KEYS[2]: {N}:value, the permits available now (OVERALL)
-- clientValueKey    KEYS[3]: {N}:value:<client-id>, the same for one client (PER_CLIENT)
-- permitsKey        KEYS[4]: {N}:permits, ZSET of the permits taken in the window: member
--          struct.pack('Bc0I', 16, <16 random bytes>, permits) (see pack),
--          score the time taken (ms)
-- clientPermitsKey  KEYS[5]: {N}:permits:<client-id>, the same for one client

local configKey, valueKey, clientValueKey, permitsKey, clientPermitsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local nowMs, nowSubMs, nowMicros = clockLib()

-- The error replies of the rate limiter's scripts. Their first word is a
-- code the Go side reads (scripts.Code): unlike the text of a failed
-- assert, it does not change with the server's version.
local notSet = 'RELOCK_RATE_NOT_SET rate limiter is not set'
local aboveRate = 'RELOCK_RATE_EXCEEDED more permits asked than the rate'

-- config reads the configuration and returns it with the value and window
-- keys of its type, or nil when it is not set (where Redisson's scripts
-- fail with 'RateLimiter is not initialized', the caller returns the error
-- reply notSet).
local function config()
	local rate = redis.call('hget', configKey, 'rate')
	local interval = redis.call('hget', configKey, 'interval')
	local type = redis.call('hget', configKey, 'type')
	if rate == false or interval == false or type == false then
		return nil
	end
	if type == '1' then
		return tonumber(rate), tonumber(interval), clientValueKey, clientPermitsKey
	end
	return tonumber(rate), tonumber(interval), valueKey, permitsKey
end

-- pack is struct.pack('Bc0I', #id, id, permits), Redisson's window
-- member: a length byte, the id, and the permits as a 4-byte unsigned int,
-- little-endian (the byte order of every platform Redis runs on). Written
-- out so that it needs no struct library (miniredis has none); the bytes
-- are the same.
local function pack(id, permits)
	local n = tonumber(permits)
	return string.char(#id) .. id .. string.char(n % 256, math.floor(n / 256) % 256,
		math.floor(n / 65536) % 256, math.floor(n / 16777216) % 256)
end

-- unpackPermits is the permits of a window member, the second value of
-- struct.unpack('Bc0I', member).
local function unpackPermits(member)
	local at = member:byte(1) + 2
	local b1, b2, b3, b4 = member:byte(at, at + 3)
	return b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
end

-- taken sums the permits recorded in window members.
local function taken(members)
	local sum = 0
	for _, v in ipairs(members) do
		sum = sum + unpackPermits(v)
	end
	return sum
end

-- writeConfig writes the configuration (rate, interval, type,
-- keepAliveTime), and gives N the keep-alive as its TTL when set, as
-- Redisson's setRate and updateRate scripts do first.
local function writeConfig(rate, interval, type, keepAliveMs)
	redis.call('hset', configKey, 'rate', rate)
	redis.call('hset', configKey, 'interval', interval)
	redis.call('hset', configKey, 'type', type)
	redis.call('hset', configKey, 'keepAliveTime', keepAliveMs)
	if tonumber(keepAliveMs) > 0 then
		redis.call('pexpire', configKey, keepAliveMs)
	end
end

-- keepAlive renews the keys' TTL as every Redisson script does last: to
-- keepAliveTime when set, else to the configuration's own TTL.
local function keepAlive(valueName, permitsName)
	local keep = redis.call('hget', configKey, 'keepAliveTime')
	if keep ~= false and tonumber(keep) > 0 then
		redis.call('pexpire', configKey, keep)
		redis.call('pexpire', valueName, keep)
		redis.call('pexpire', permitsName, keep)
		return
	end
	local ttl = redis.call('pttl', configKey)
	if ttl > 0 then
		redis.call('pexpire', valueName, ttl)
		redis.call('pexpire', permitsName, ttl)
	end
end

-- A key N that holds anything but a hash fails the script before its body
-- runs, so nothing changes, with a WRONGTYPE reply that names what N holds
-- (as countlib.lua does for counts).
do
	local held = redis.call('type', configKey)['ok']
	if held ~= 'hash' and held ~= 'none' then
		return redis.error_reply('WRONGTYPE the key holds a ' .. held .. ", where a rate limiter's configuration belongs")
	end
end
