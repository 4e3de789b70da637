package reentrant

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/scripts"
	"github.com/relock-go/relock/watchdog"
)

// Errors returned by this package, to be tested with errors.Is. Returned
// errors wrap them with the operation and lock name.
var (
	// ErrNotHeld: the caller's owner does not hold the lock (it never did,
	// it already released it, or its hold expired).
	ErrNotHeld = errors.New("lock not held by this owner")

	// ErrLockLost: a hold this client believed in is gone, or can no longer
	// be trusted (its key vanished, or renewal could not be confirmed before
	// the local deadline). It is the cause of a held context's cancellation.
	ErrLockLost = errors.New("lock lost")

	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client closed")

	// ErrWrongType: the key holds a value of another type than the lock or
	// synchronizer expects (a string where a lock's hash should be, say).
	// It is left untouched.
	ErrWrongType = errors.New("key holds a value of another type")

	// ErrReentry: Lock or TryLock of a non-reentrant lock (see
	// Client.NonReentrantLock) by an owner that holds it already. It is
	// returned at once, and the hold stays as it was: one hold.
	ErrReentry = errors.New("non-reentrant lock already held by this owner")

	// ErrInvalidArgument: a name, duration, count or owner that cannot be
	// used, such as an empty lock name or a negative lease.
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrNotAcquired: a wait limit (NoWait, WaitAtMost, RetryCount) ran out
	// before the lock (or the permits) could be taken. TryLock and
	// TryAcquire report it as ok == false.
	ErrNotAcquired = errors.New("not acquired")

	// ErrNotSynced: with Options.ReplicaSync, fewer replicas than asked
	// confirmed an acquire before the sync timeout. The acquire was rolled
	// back; the caller may try again.
	ErrNotSynced = scripts.ErrNotSynced

	// Why a hold was lost: the cause of a held context cancelled with
	// ErrLockLost wraps one of these two as well.

	// ErrNotRenewed: a renewal reached Redis and found the hold gone (the
	// key deleted, expired, force-unlocked or taken by another).
	ErrNotRenewed = watchdog.ErrNotRenewed
	// ErrUnconfirmed: no renewal was confirmed before the local deadline
	// (Redis down, paused or cut off).
	ErrUnconfirmed = watchdog.ErrUnconfirmed

	// ErrLeaseEnded: a LeaseFor lease reached its local deadline before
	// the hold was given back. It is how such a hold ends, not a loss: no
	// ErrLockLost, no OnLockLost, no warning. The held context is
	// cancelled with it, and an Unlock that comes later returns it: the
	// lock may have been another's since, so work done under it after the
	// lease ended was not protected.
	ErrLeaseEnded = watchdog.ErrLeaseEnded

	// ErrNoPermission: the Redis user (ACL) may not run something relock
	// needs; the error names it. See docs/deployment.md for a user with
	// exactly the rights relock needs.
	ErrNoPermission = errors.New("the Redis user lacks a permission relock needs")

	// ErrSyncUnavailable: Options.ReplicaSync.Required is set and the
	// server refuses WAIT, so no lock can be confirmed on replicas.
	ErrSyncUnavailable = errors.New("the server refuses WAIT (or ROLE); replica sync unavailable")
)

// errLateReply: an acquire's reply came after the deadline its new hold
// would have had, and the hold could not be confirmed (see holdTable.keep); the
// attempt counts as one whose reply was lost.
var errLateReply = errors.New("the acquire's reply came after its hold's deadline")

// errHoldExpired: as errLateReply, but Redis said the hold had expired
// meanwhile.
var errHoldExpired = fmt.Errorf("%w, and the hold had expired", errLateReply)

// ErrStalled: a hold taken with ProgressWithin went longer than its
// deadline without a Progress report, so this client stopped renewing it,
// gave it back, and cancelled its held contexts with a cause that wraps
// ErrStalled. It is the holder's own silence, not Redis: it does not wrap
// ErrLockLost, and OnLockLost is not called. An Unlock that comes later
// returns it.
var ErrStalled = errors.New("no progress within the hold's progress deadline")

// ErrRateNotSet: the rate limiter has no configuration (TrySetRate or
// SetRate was never called, or its keys expired with KeepAlive).
var ErrRateNotSet = errors.New("rate limiter not set")

// ErrDeadlock: owners wait for each other in a cycle, and this waiter was
// picked to give up (see DeadlockError). Its Lock call returns it; the
// caller should release the locks its owner holds, so that the others can
// go on.
var ErrDeadlock = errors.New("deadlock")

// DeadlockError describes the cycle a waiter gave up on. errors.Is(err,
// ErrDeadlock) holds; errors.As finds it.
type DeadlockError struct {
	// Cycle is each waits-for edge, starting with the waiter that gave up:
	// each edge's Holder is the next edge's Waiter, and the last edge's
	// Holder is the first edge's Waiter.
	Cycle []WaitEdge
}

// WaitEdge is one edge of a waits-for graph: owner Waiter waits for Lock,
// which Holder holds, since Since (on the waiter's clock).
type WaitEdge struct {
	Waiter, Lock, Holder string
	Since                time.Time
}

// Error reads like PostgreSQL's detail: "owner A waits for lock X held by
// owner B; owner B waits for lock Y held by owner A".
func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("deadlock: ")
	for i, edge := range e.Cycle {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "owner %s waits for lock %q held by owner %s", edge.Waiter, edge.Lock, edge.Holder)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrDeadlock) hold.
func (e *DeadlockError) Unwrap() error { return ErrDeadlock }

// pacing is how a try that failed with err paces the next (see
// retry.Outcome): the server refused it for now (it is up), or was not
// heard.
func pacing(err error) retry.Outcome {
	if scripts.IsUnavailable(err) {
		return retry.Refused
	}
	return retry.Again
}
