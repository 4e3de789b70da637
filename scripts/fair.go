package scripts

import (
	"context"
	_ "embed"
	"time"

	"github.com/redis/rueidis"
)

var (
	//go:embed fairacquire.lua
	fairAcquireLua    string
	fairAcquireScript = newScript(fairAcquireLua)

	//go:embed fairrelease.lua
	fairReleaseLua    string
	fairReleaseScript = newScript(fairReleaseLua)

	//go:embed fairleave.lua
	fairLeaveLua    string
	fairLeaveScript = newScript(fairLeaveLua)
)

// FairQueue returns the key of lock name's waiter queue:
// redisson_lock_queue:{name}.
func FairQueue(name string) string { return Prefixed("redisson_lock_queue", name) }

// FairTimeouts returns the key of lock name's waiter deadlines:
// redisson_lock_timeout:{name}.
func FairTimeouts(name string) string { return Prefixed("redisson_lock_timeout", name) }

// FairChannel returns the channel on which owner, waiting for fair lock
// name, is told it is its turn: redisson_lock__channel:{name}:owner.
func FairChannel(name, owner string) string { return LockChannel(name) + ":" + owner }

func fairKeys(name string) []string {
	return []string{name, FairQueue(name), FairTimeouts(name), LockChannel(name)}
}

// FairAcquire runs fairacquire.lua. When not granted, ttl bounds the wait
// before the next attempt.
func FairAcquire(ctx context.Context, c rueidis.Client, key, owner string, lease, waitTimeout time.Duration) (bool, time.Duration, error) {
	return acquireReply(fairAcquireScript.exec(ctx, c, fairKeys(key)[:3], []string{millis(lease), owner, millis(waitTimeout)}))
}

// FairRelease runs fairrelease.lua.
func FairRelease(ctx context.Context, c rueidis.Client, key, owner string, lease time.Duration, pub Publish) (Released, error) {
	return releaseReply(fairReleaseScript.exec(ctx, c, fairKeys(key), []string{UnlockMessage, millis(lease), owner, string(pub)}))
}

// FairLeave runs fairleave.lua: owner stops waiting for key.
func FairLeave(ctx context.Context, c rueidis.Client, key, owner string, pub Publish) error {
	r, _ := fairLeaveScript.exec(ctx, c, fairKeys(key), []string{UnlockMessage, owner, string(pub)})
	return r.Error()
}
