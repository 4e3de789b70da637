package reentrant

import (
	"fmt"

	"github.com/relock-go/relock/scripts"
)

// The constructors of each kind of Lock but the plain one (lock.go) and
// the read-write pair (rwlock.go), with what sets each kind apart.

// FencedLock returns a handle on the fenced lock name, Redisson's
// RFencedLock: a reentrant lock whose every successful acquire, re-entry
// included, draws a fencing token from the counter
// redisson_lock_token:{name}; TokenFrom(held) returns it. Tokens only grow,
// across owners, clients and processes, so a store that remembers the
// largest token it has accepted and refuses smaller ones turns away a
// holder whose lock has expired meanwhile (a paused process, a lost lease).
// See docs/fencing.md.
func (c *Client) FencedLock(name string) *Lock {
	return c.newLock(name, fencedLock)
}

// FairLock returns a handle on the fair lock name, Redisson's RFairLock: a
// reentrant lock granted in the order waiters arrived, across clients and
// processes, Java Redisson's included. Waiters queue in Redis (LIST
// redisson_lock_queue:{name}, with deadlines in ZSET
// redisson_lock_timeout:{name}); a release tells only the head of the
// queue, on its own channel redisson_lock__channel:{name}:<owner>. A relock
// release hands the lock straight to a relock head (a Lock or TryLock that
// waits, kept by the watchdog, whose ctx carries no owner, on a client
// without ReplicaSync), so that head's wait ends on the message, with no
// attempt of its own (see docs/waiting.md).
//
// The queue keeps Redisson's arithmetic. Each waiter is given a turn
// (Options.FairWaitTimeout, or the WaitAtMost limit when there is one): its
// deadline is the deadline of the waiter ahead of it plus its turn, and
// each grant moves every deadline one turn earlier. A waiter whose deadline
// passes while it is at the head is taken for dead and dropped; a live one
// that is dropped (the holder kept the lock longer than a turn) joins the
// queue again at its end on its next attempt, as a Java waiter does. So set
// FairWaitTimeout above the longest hold when order matters across long
// holds.
//
// A waiter that gives up (its ctx ends, a wait limit runs out) leaves the
// queue at once and those behind it move up a turn, as with Redisson's
// tryLock (if ctx ended while an attempt was in flight, Lock returns at
// once and the waiter leaves when that attempt's reply has come). TryLock
// without a wait tries once and never queues. Deadlines are Redis's clock;
// see docs/migrating-from-redisson.md for mixing with Java waiters.
func (c *Client) FairLock(name string) *Lock {
	return c.newLock(name, fairLock)
}

// PriorityLock returns a handle on the priority lock name, relock's own
// kind (Redisson has none): a reentrant lock that, when free, goes to the
// best-placed of its waiters, across clients and processes. A waiter's
// place is its arrival moved earlier by its priority (the Priority option,
// 0 to 255, default 0) times Options.PriorityAging: equal priorities are
// served in arrival order, and no waiter starves, since one arriving later
// passes it only within (its priority - the waiter's) x PriorityAging of
// its arrival. Options.StrictPriority orders by priority alone (then
// arrival), for those who accept that low priorities may wait forever.
//
// The hold is Redisson's RLock hash, so Java's RLock.isLocked and
// forceUnlock see it; waiters queue in relock's own keys under the name's
// hash tag (ZSET relock_priority_queue:{name}, HASH
// relock_priority_waiters:{name}; see docs/wire-format.md). A release tells
// the best-placed waiter only, on its own channel, or hands it the lock
// outright, as the fair lock's does (see docs/waiting.md). A Java RLock on
// the same name does not queue: it can take the lock when it is free, past
// relock's waiters.
//
// A re-entry never queues, nor does TryLock without a wait. A waiter that
// gives up leaves the queue at once, and if it was the best placed of a
// free lock the next is told. Each attempt of a waiter renews its place for
// max(WatchdogTimeout, 3 x RepollInterval): a waiter whose process died is
// skipped when its window ends (30s by default). See docs/priority.md.
func (c *Client) PriorityLock(name string) *Lock {
	return c.newLock(name, priorityLock)
}

// NonReentrantLock returns a handle on the non-reentrant lock name,
// Redisson's RNonReentrantLock (Redisson 4.4): RLock's layout and wake-ups,
// shared with Java clients as a plain lock is, but an owner holds it once
// at most. Lock or TryLock with a context that already holds it (the held
// context, or one carrying its owner) fails at once with ErrReentry, where
// Redisson throws IllegalMonitorStateException: never a second hold, never
// a wait for itself. A call with a context that carries no owner gets an
// owner of its own, as with every lock, so a goroutine that calls Lock
// again that way waits like anyone else, as with sync.Mutex.
func (c *Client) NonReentrantLock(name string) *Lock {
	return c.newLock(name, nonReentrantLock)
}

// NonReentrantFairLock returns a handle on the non-reentrant fair lock
// name, Redisson's RNonReentrantFairLock (Redisson 4.4): FairLock's layout,
// queue and hand-over, shared with Java clients as a fair lock is, but an
// owner holds it once at most, as with NonReentrantLock. A refused
// re-entry (ErrReentry) does not join the queue.
func (c *Client) NonReentrantFairLock(name string) *Lock {
	return c.newLock(name, nonReentrantFairLock)
}

// SpinLock returns a handle on the reentrant lock name that waits like
// Redisson's spin lock: it never subscribes, but retries with exponential
// backoff and jitter within b (zero fields take Redisson's 1ms and 128ms; a
// Max below Min is raised to Min), and its releases publish nothing. It shares the RLock layout, so spin and
// ordinary handles on one name exclude each other; ordinary waiters notice a
// spin release by their re-poll bound.
func (c *Client) SpinLock(name string, b Backoff) *Lock {
	if b.Min <= 0 {
		b.Min = defaultSpinMin
	}
	if b.Max <= 0 {
		b.Max = defaultSpinMax
	}
	b.Max = max(b.Max, b.Min)
	l := c.newLock(name, spinLock)
	l.r.spin = b
	return l
}

// GroupLock returns a handle on the values of group lock group, Redisson's
// RedissonFasterMultiLock (getMultiLock(group, values), Redisson 3.38):
// one Redis hash per group, in which each value is held by one owner at a
// time. Lock takes every value at once or waits, so two calls whose
// values overlap exclude each other and two whose values are disjoint run
// side by side, at the cost of one key and one script per acquisition
// however many values there are. Holds are reentrant and kept by the
// watchdog; Unlock gives back one hold of every value. A waiter is woken
// by the release of the value that kept it out (one waiter of each
// client), or by any Java release in the group. Deadlock detection does
// not see group locks.
//
// A value is the bytes Redisson's codec writes for the Java object: for a
// Java String with StringCodec, its UTF-8 bytes, the Go string itself. Java
// clients must use such a codec to share values with Go (Redisson's
// default codec, Kryo5, writes a String differently). Each value is
// stored as the base64 of its HighwayHash-128, as Redisson does
// (docs/wire-format.md), so values may be of any length.
//
// The handle's values are fixed; handles with the same group and values,
// in any order and with repeats, are interchangeable. A call with no values
// fails with ErrInvalidArgument.
func (c *Client) GroupLock(group string, values ...string) *Lock {
	l := c.newLock(group, groupLock)
	l.r.fields, l.read = scripts.GroupFields(values), groupReader{}
	l.r.values = valuesOf(l.r.fields)
	if len(values) == 0 {
		l.r.bad = fmt.Errorf("relock: %w: group lock %q has no values", ErrInvalidArgument, l.r.name)
	}
	return l
}
