package reentrant

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
