package reentrant

// FairLock returns a handle on the fair lock name, Redisson's RFairLock: a
// reentrant lock granted in the order waiters arrived, across clients and
// processes, Java Redisson's included. Waiters queue in Redis (LIST
// redisson_lock_queue:{name}, with deadlines in ZSET
// redisson_lock_timeout:{name}); a release tells only the head of the
// queue, on its own channel redisson_lock__channel:{name}:<owner>.
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
// tryLock. TryLock without a wait tries once and never queues. Deadlines are
// Redis's clock; see docs/migrating-from-redisson.md for mixing with Java
// waiters.
func (c *Client) FairLock(name string) *Lock {
	return &Lock{c: c, name: name, kind: fairLock}
}
