package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
)

var (
	//go:embed readacquire.lua
	readAcquireLua    string
	readAcquireScript = newScript(readAcquireLua)

	//go:embed writeacquire.lua
	writeAcquireLua    string
	writeAcquireScript = newScript(writeAcquireLua)

	//go:embed readrelease.lua
	readReleaseLua    string
	readReleaseScript = newScript(latchLib, readReleaseLua)

	//go:embed writerelease.lua
	writeReleaseLua    string
	writeReleaseScript = newScript(latchLib, writeReleaseLua)

	//go:embed readrenew.lua
	readRenewLua    string
	readRenewScript = newScript(readRenewLua)
)

// RWChannel returns the channel of read-write lock name:
// redisson_rwlock:{name}.
func RWChannel(name string) string { return prefixed("redisson_rwlock", name) }

// WriteField returns the hash field of owner's write hold: owner + ":write".
func WriteField(owner string) string { return owner + ":write" }

// readTimeoutPrefix returns {name}:<owner>:rwlock_timeout, the prefix of
// owner's per-hold timeout keys.
func readTimeoutPrefix(name, owner string) string {
	return suffixed(name, owner+":rwlock_timeout")
}

// keyPrefix returns the prefix that, with ":<field>:rwlock_timeout:<k>",
// makes any owner's timeout key: "{name}", or name itself when it has "{".
func keyPrefix(name string) string {
	return strings.TrimSuffix(suffixed(name, ""), ":")
}

// ReadAcquire runs readacquire.lua for a (Key, Owner, Lease), as
// LockAcquire does for a reentrant lock.
func ReadAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	return acquireReply(readAcquireScript.exec(ctx, c, []string{a.Key, readTimeoutPrefix(a.Key, a.Owner)}, []string{millis(a.Lease), a.Owner, WriteField(a.Owner)}))
}

// WriteAcquire runs writeacquire.lua for a (Key, Owner, Lease), as
// LockAcquire does for a reentrant lock.
func WriteAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	return acquireReply(writeAcquireScript.exec(ctx, c, []string{a.Key}, []string{millis(a.Lease), WriteField(a.Owner)}))
}

// acquireReply reads an acquire script's reply. An acquire whose writes
// replicas did not confirm reports OK and the sync error: the caller
// decides whether to keep or roll back the hold.
func acquireReply(r rueidis.RedisResult, syncErr error) (Acquired, error) {
	ms, err := r.AsInt64()
	if rueidis.IsRedisNil(err) {
		return Acquired{OK: true}, syncErr
	}
	if err != nil {
		return Acquired{}, err
	}
	switch ms {
	case handed:
		return Acquired{OK: true, Handed: true}, syncErr
	case guarded:
		return Acquired{}, nil // after Abandon: nobody awaits this reply
	}
	return Acquired{PTTL: time.Duration(ms) * time.Millisecond}, nil
}

// handed is acquire.lua's reply when a release gave the lock to the
// caller's client (Acquired.Handed).
const handed = -3

// guarded is guard.lua's reply: the attempt ran after Abandon, and did
// nothing.
const guarded = -4

// ReadRelease runs readrelease.lua for r.Owner's newest read hold.
// r.Lease is not used: the remaining read holds decide the TTL.
func ReadRelease(ctx context.Context, c Conn, r Release) (Released, error) {
	keys := []string{r.Key, RWChannel(r.Key), readTimeoutPrefix(r.Key, r.Owner), keyPrefix(r.Key), unlockLatch(r.Key, r.RequestID)}
	return releaseReply(readReleaseScript.exec(ctx, c, keys, []string{pubsub.WakeOne, r.Owner, string(r.Publish), millis(r.LatchTTL)}))
}

// WriteRelease runs writerelease.lua for r.Owner's newest write hold.
func WriteRelease(ctx context.Context, c Conn, r Release) (Released, error) {
	keys := []string{r.Key, RWChannel(r.Key), unlockLatch(r.Key, r.RequestID)}
	args := []string{pubsub.WakeAll, millis(r.Lease), WriteField(r.Owner), string(r.Publish), millis(r.LatchTTL)}
	return releaseReply(writeReleaseScript.exec(ctx, c, keys, args))
}

// releaseReply reads a release script's reply. A release that replicas did
// not confirm still happened on the master: the worst a failover can do is
// bring the hold back until its TTL ends, so the sync error is dropped.
func releaseReply(r rueidis.RedisResult, _ error) (Released, error) {
	n, err := r.AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return NotHeld, nil
	case err != nil:
		return NotHeld, err
	case n == 1:
		return Freed, nil
	case n == 0:
		return StillHeld, nil
	}
	return NotHeld, fmt.Errorf("release: unexpected reply %d", n)
}

// ReadRenew is Renew for read holds: it also extends every read hold's
// timeout key.
func ReadRenew(ctx context.Context, c Conn, ttl time.Duration, batches [][]Held) ([][]bool, []error) {
	return renewWith(readRenewScript, ctx, c, ttl, batches)
}
