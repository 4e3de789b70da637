package scripts

import "strings"

// prefixed returns Redisson's prefix form of a name derived from lock name:
// prefix + ":" + name when name contains "{", else prefix + ":{" + name + "}".
// Either way the result hashes to the same cluster slot as name.
func prefixed(prefix, name string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name
	}
	return prefix + ":{" + name + "}"
}

// suffixed returns Redisson's suffix form of a name derived from lock name:
// name + ":" + suffix when name contains "{", else "{" + name + "}:" + suffix.
func suffixed(name, suffix string) string {
	if strings.Contains(name, "{") {
		return name + ":" + suffix
	}
	return "{" + name + "}:" + suffix
}

// LockChannel returns the channel on which releases of lock name are
// published: redisson_lock__channel:{name}.
func LockChannel(name string) string {
	return prefixed("redisson_lock__channel", name)
}

// unlockLatch returns the key that remembers the reply of one release
// request: redisson_unlock_latch:{name}:requestID.
func unlockLatch(name, requestID string) string {
	if strings.Contains(name, "{") { // prefixed, in one allocation
		return "redisson_unlock_latch:" + name + ":" + requestID
	}
	return "redisson_unlock_latch:{" + name + "}:" + requestID
}

// SlotSafe reports whether every name derived from lock name shares its
// cluster slot. That fails only for a name containing "{" without a
// non-empty hash tag (such as "a{}b" or "a{b"): the derived name's tag rule
// then hashes more text than the name's own. Such names work on one node but
// not on a cluster, for Redisson as well.
func SlotSafe(name string) bool {
	open := strings.IndexByte(name, '{')
	if open < 0 {
		return true
	}
	end := strings.IndexByte(name[open+1:], '}')
	return end > 0
}

// Slot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its hash tag,
// the text between the first "{" and the next "}" when that is not empty, or
// of the whole key otherwise, modulo 16384.
func Slot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc & 16383
}

// WaitEdgeKey returns the key under which owner's wait for a lock is
// registered for deadlock detection, relock's own: relock_wait:{owner},
// "<since, ms>:<lock name>".
func WaitEdgeKey(owner string) string { return "relock_wait:{" + owner + "}" }

// grants returns the key of lock name's grants, relock's own:
// relock_grants:{name}: a fair or priority lock's (see handOff in
// fairlib.lua), or a plain lock's offers (see Offer).
func grants(name string) string { return prefixed("relock_grants", name) }
