package reentrant

import (
	"time"
)

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

// strictAging is the aging that StrictPriority stands for: a level moves a
// place earlier by about 115 days, more than any two waiters' arrivals lie
// apart, and 255 levels of it keep every place within the 2^53 µs that a
// score holds exactly.
const strictAging = 10_000_000 * time.Second

// priorityAging is the aging a priority lock's places are computed with.
func (o Options) priorityAging() time.Duration {
	if o.StrictPriority {
		return strictAging
	}
	return o.PriorityAging
}
