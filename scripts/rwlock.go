package scripts

import (
	"context"
	_ "embed"
	"strings"
	"time"

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

// ReadRenew is Renew for read holds: it also extends every read hold's
// timeout key.
func ReadRenew(ctx context.Context, c Conn, ttl time.Duration, batches [][]Held) ([][]bool, []error) {
	return renewWith(readRenewScript, ctx, c, ttl, batches)
}
