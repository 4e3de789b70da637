package reentrant

import (
	"context"
	"time"
)

// Hooks let a program watch what a Client does, for metrics, traces or
// logs; the module github.com/relock-go/relock/otel builds OpenTelemetry
// metrics and spans on them. Every hook is optional, and a nil one costs
// nothing.
//
// Hooks run on the goroutine doing the work: a caller's for the acquire
// and release hooks, the watchdog's loop for Renewed and for HoldEnded of a
// lost hold. They must return quickly and must not block or call the
// Client: a slow hook delays its caller, and a blocked one stalls the
// renewal of every lock the client holds. Hand anything slow to another
// goroutine.
type Hooks struct {
	// AcquireStarted is called when a call that takes a lock or a permit,
	// or awaits a latch, begins: Lock, TryLock and Do (once per lock a
	// MultiLock or Redlock takes), the synchronizers' Acquire and
	// TryAcquire, and CountDownLatch.Await. Only Kind, Name, Start and
	// Priority are set.
	AcquireStarted func(ctx context.Context, a Acquire)

	// AcquireEnded is called when that call ends, whatever its outcome.
	AcquireEnded func(ctx context.Context, a Acquire)

	// HoldEnded is called once for each acquisition that AcquireEnded
	// reported with Held, when it ends: given back by Unlock or
	// Permit.Release, lost, or dropped by Close. The holds in progress are
	// the Held acquisitions not yet ended. It runs before the
	// acquisition's held context is cancelled, but for a hold that
	// stalled (ProgressWithin): its held contexts end first, so the work
	// stops at once, and each acquisition's HoldEnded follows the release
	// that gave it back, with that release's time and error. ctx is the
	// one the acquisition was taken with. A hook that panics on one of
	// relock's goroutines is recovered and logged.
	HoldEnded func(ctx context.Context, e HoldEnd)

	// Renewed is called after each renewal round of the watchdog.
	Renewed func(r Renewal)

	// Woken is called when a release message wakes a waiter, before its
	// next attempt.
	Woken func(ctx context.Context, kind Kind, name string)

	// Deadlock is called when a waiter gives up on a cycle of owners
	// waiting for each other (ErrDeadlock), before its Lock call returns,
	// with the cycle.
	Deadlock func(ctx context.Context, e *DeadlockError)

	// RenewalLate is called from the watchdog's loop when a hold's
	// renewals fall behind: none confirmed for half of WatchdogTimeout
	// (one due every third of it), so the hold is lost at l.Deadline,
	// 0.4 of WatchdogTimeout away, unless one is confirmed first. It is
	// called once per gap, with the ctx the hold's first acquisition was
	// taken with; a line is logged at Warn as well. A holder can finish
	// or checkpoint its work before the loss instead of learning of it
	// after.
	RenewalLate func(ctx context.Context, l LateRenewal)
}

// LateRenewal describes a hold whose renewals are late to RenewalLate.
type LateRenewal struct {
	Kind  Kind
	Name  string
	Owner Owner
	// Confirmed is when the last confirmed renewal (or the acquire) was
	// sent; Deadline, when the hold is lost unless another is confirmed:
	// its local deadline (see LeaseDeadline).
	Confirmed, Deadline time.Time
}

// Acquire describes one call that takes a lock or a permit, or awaits a
// latch, to the acquire hooks.
type Acquire struct {
	// Kind is what is taken: KindLock, KindFenced, KindFair,
	// KindPriority, KindRead, KindWrite, KindSpin, KindSemaphore,
	// KindPermitSemaphore, KindLatch or KindRate.
	Kind Kind
	// Name is the lock's or synchronizer's name.
	Name string
	// Start is when the call began.
	Start time.Time
	// Priority is a PriorityLock call's priority (see Priority); 0 for
	// every other kind.
	Priority int

	// The rest is set for AcquireEnded.

	// Waited is how long the call took.
	Waited time.Duration
	// Attempts is how many acquire scripts the call ran.
	Attempts int
	// Err is the call's error: nil when it took what it asked for (or
	// the latch opened); wrapping ErrNotAcquired when it was taken by
	// others for as long as the call would wait; anything else is a
	// failure, an outage included.
	Err error
	// Held says the call recorded a hold, which a HoldEnded will end: a
	// lock's acquisition or a permit.
	Held bool
}

// HoldEnd describes the end of one acquisition to HoldEnded.
type HoldEnd struct {
	Kind Kind
	Name string
	// Owner is the holder; for a permit, its id.
	Owner Owner
	// Held is how long it was held: from when its acquire was sent.
	Held time.Duration
	// Cause is nil when Unlock or Permit.Release gave it back; otherwise
	// it wraps ErrLockLost (with the reason: ErrNotRenewed or
	// ErrUnconfirmed), or ErrLeaseEnded (a LeaseFor lease ran its course,
	// which is not a loss), or ErrStalled (its progress deadline passed),
	// or is ErrClosed.
	Cause error
	// Releasing is how long the release that gave it back took (0 when
	// it was not given back), and Err its error: Unlock's, or, for a
	// stall, that of the release that gave it back (or of the first one
	// that failed, after which the rest expire with their TTL).
	Releasing time.Duration
	Err       error
}

// Renewal describes one renewal round of the watchdog to Renewed.
type Renewal struct {
	// Holds is how many holds the round tried to renew; Failed, how many
	// it did not (found gone, or their batch got no answer).
	Holds, Failed int
	// Duration is how long the round's script calls took.
	Duration time.Duration
	// Lag is how late the round's renewals were confirmed against their
	// schedule: a third of TTL after the send of the last round that was
	// confirmed whole; 0 for a round that was not, and for the first. A
	// Lag near a sixth of TTL makes holds late (see RenewalLate). TTL is
	// the TTL renewals set, WatchdogTimeout.
	Lag, TTL time.Duration
	// Err is the first error of the round's script calls, if any.
	Err error
}
