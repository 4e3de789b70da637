package scripts

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/relock-go/relock/pubsub"
)

// fairLib holds the functions every fair-lock script shares; it is
// prepended to each script's body.
//
//go:embed fairlib.lua
var fairLib string

var (
	//go:embed fairacquire.lua
	fairAcquireLua    string
	fairAcquireScript = newScript(clockLib, grantLib, fairLib, fairAcquireLua)

	//go:embed fairrelease.lua
	fairReleaseLua    string
	fairReleaseScript = newScript(clockLib, grantLib, fairLib, latchLib, holdLib, fairReleaseLua)

	//go:embed fairleave.lua
	fairLeaveLua    string
	fairLeaveScript = newScript(clockLib, grantLib, fairLib, fairLeaveLua)

	//go:embed fairforceunlock.lua
	fairForceUnlockLua    string
	fairForceUnlockScript = newScript(clockLib, grantLib, fairLib, fairForceUnlockLua)
)

// fairQueue returns the key of lock name's waiter queue:
// redisson_lock_queue:{name}.
func fairQueue(name string) string { return prefixed("redisson_lock_queue", name) }

// fairTimeouts returns the key of lock name's waiter deadlines:
// redisson_lock_timeout:{name}.
func fairTimeouts(name string) string { return prefixed("redisson_lock_timeout", name) }

// FairChannel returns the channel on which owner, waiting for fair lock
// name, is told it is its turn: redisson_lock__channel:{name}:owner.
func FairChannel(name, owner string) string { return LockChannel(name) + ":" + owner }

func fairKeys(name string) []string {
	return []string{name, fairQueue(name), fairTimeouts(name), LockChannel(name), grants(name)}
}

// FairAcquire runs fairacquire.lua (RFairLock) for a. With a.Join, an
// owner that cannot take the lock joins the queue (or stays in it) and
// PTTL bounds the wait before the next attempt: the lock's PTTL, or how
// long the turns ahead may last; 0 means another waiter's turn. Without it
// the script only tries once and changes nothing when the lock is not free
// for Owner (but the expired heads it drops, and the new head it then
// tells, with a.Publish). With a.GrantTry, Owner takes the lock from a
// release while it waits: the lock is Owner's, with the lease its last
// attempt asked for counted from that attempt, and the release publishes
// a [pubsub.Granted] message naming that attempt on Owner's channel; an
// attempt after a grant whose message was missed takes the grant.
func FairAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	return fairAcquire(ctx, c, a, false)
}

// NonReentrantFairAcquire runs fairacquire.lua (RNonReentrantFairLock) for
// a: FairAcquire, but an owner that holds the lock already is refused with
// the error reply CodeReentry, and the queue is left as it was (but for
// the expired heads dropped on the way).
func NonReentrantFairAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	return fairAcquire(ctx, c, a, true)
}

func fairAcquire(ctx context.Context, c Conn, a Acquire, once bool) (Acquired, error) {
	args := []string{millis(a.Lease), a.Owner, millis(a.Turn), flag(a.Join), string(a.Publish), pubsub.WakeOne, strconv.Itoa(a.GrantTry), flag(once)}
	return acquireReply(fairAcquireScript.exec(ctx, c, fairKeys(a.Key), args))
}

// FairRelease runs fairrelease.lua for r.
func FairRelease(ctx context.Context, c Conn, r Release) (Released, error) {
	keys := append(fairKeys(r.Key), unlockLatch(r.Key, r.RequestID))
	args := []string{pubsub.WakeOne, millis(r.Lease), r.Owner, string(r.Publish), millis(r.LatchTTL), flag(r.Again), flag(r.Believed)}
	return releaseReply(fairReleaseScript.exec(ctx, c, keys, args))
}

// FairLeave runs fairleave.lua: owner, which joined key's queue with turn
// wait, stops waiting, and gives back a grant it did not take.
func FairLeave(ctx context.Context, c Conn, key, owner string, wait time.Duration, pub Publish) error {
	r, _ := fairLeaveScript.exec(ctx, c, fairKeys(key), []string{pubsub.WakeOne, owner, string(pub), millis(wait)})
	return r.Error()
}

// FairForceUnlock runs fairforceunlock.lua: it deletes fair lock key
// whoever holds it and tells the head of its queue. It reports whether
// there was a lock.
func FairForceUnlock(ctx context.Context, c Conn, key string, pub Publish) (bool, error) {
	r, _ := fairForceUnlockScript.exec(ctx, c, fairKeys(key), []string{pubsub.WakeOne, string(pub)})
	n, err := r.AsInt64()
	return n == 1, err
}
