package scripts

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/relock-go/relock/pubsub"
)

// priorityLib holds the functions every priority-lock script shares; it is
// prepended to each script's body.
//
//go:embed prioritylib.lua
var priorityLib string

var (
	//go:embed priorityacquire.lua
	priorityAcquireLua    string
	priorityAcquireScript = newScript(clockLib, grantLib, priorityLib, priorityAcquireLua)

	//go:embed priorityrelease.lua
	priorityReleaseLua    string
	priorityReleaseScript = newScript(clockLib, grantLib, priorityLib, latchLib, holdLib, priorityReleaseLua)

	//go:embed priorityleave.lua
	priorityLeaveLua    string
	priorityLeaveScript = newScript(clockLib, grantLib, priorityLib, priorityLeaveLua)

	//go:embed priorityforceunlock.lua
	priorityForceUnlockLua    string
	priorityForceUnlockScript = newScript(clockLib, grantLib, priorityLib, priorityForceUnlockLua)
)

// priorityQueue returns the key of priority lock name's queue, relock's
// own: ZSET relock_priority_queue:{name}, owner -> its place in
// microseconds of Redis's clock (its arrival moved earlier by its priority
// times the aging; the lowest is served first).
func priorityQueue(name string) string { return prefixed("relock_priority_queue", name) }

// priorityWaiters returns the key of priority lock name's waiter records,
// relock's own: HASH relock_priority_waiters:{name}, owner ->
// "<alive>:<priority>:<arrival>:<by>:<try>" (see prioritylib.lua), or "0"
// for a grant not yet released.
func priorityWaiters(name string) string { return prefixed("relock_priority_waiters", name) }

// PriorityChannel returns the channel on which owner, waiting for priority
// lock name, is told its turn has come: redisson_lock__channel:{name}:owner,
// the form of Redisson's fair lock.
func PriorityChannel(name, owner string) string { return FairChannel(name, owner) }

func priorityKeys(name string) []string {
	return []string{name, priorityQueue(name), priorityWaiters(name), LockChannel(name)}
}

// PriorityAcquire runs priorityacquire.lua for a: Owner takes the lock
// when it is free and Owner is the best-placed waiter, or takes it again.
// With a.Join, an owner that cannot take it joins the queue at its place
// (its arrival, a.Priority levels earlier by a.Aging each) or keeps it,
// and renews its record for a.Turn, the window in which it must try again
// or be taken for dead; PTTL is the lock's, or 0 when the turn is
// another's. Without it the script only tries once and changes nothing
// when the lock is not free for Owner. a.GrantTry is as for FairAcquire.
func PriorityAcquire(ctx context.Context, c Conn, a Acquire) (Acquired, error) {
	args := []string{millis(a.Lease), a.Owner, millis(a.Turn), flag(a.Join), string(a.Publish), pubsub.WakeOne,
		strconv.Itoa(a.GrantTry), strconv.Itoa(a.Priority), strconv.FormatInt(a.Aging.Microseconds(), 10)}
	return acquireReply(priorityAcquireScript.exec(ctx, c, priorityKeys(a.Key), args))
}

// PriorityRelease runs priorityrelease.lua for r.
func PriorityRelease(ctx context.Context, c Conn, r Release) (Released, error) {
	keys := append(priorityKeys(r.Key), unlockLatch(r.Key, r.RequestID))
	args := []string{pubsub.WakeOne, millis(r.Lease), r.Owner, string(r.Publish), millis(r.LatchTTL), flag(r.Again), flag(r.Believed)}
	return releaseReply(priorityReleaseScript.exec(ctx, c, keys, args))
}

// PriorityLeave runs priorityleave.lua: owner stops waiting for priority
// lock key, and gives back a grant it did not take.
func PriorityLeave(ctx context.Context, c Conn, key, owner string, _ time.Duration, pub Publish) error {
	r, _ := priorityLeaveScript.exec(ctx, c, priorityKeys(key), []string{pubsub.WakeOne, owner, string(pub)})
	return r.Error()
}

// PriorityForceUnlock runs priorityforceunlock.lua: it deletes priority
// lock key whoever holds it and hands it on to the best-placed waiter. It
// reports whether there was a lock.
func PriorityForceUnlock(ctx context.Context, c Conn, key string, pub Publish) (bool, error) {
	r, _ := priorityForceUnlockScript.exec(ctx, c, priorityKeys(key), []string{pubsub.WakeOne, string(pub)})
	n, err := r.AsInt64()
	return n == 1, err
}
