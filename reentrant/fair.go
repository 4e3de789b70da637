package reentrant

// FairLock returns a handle on the fair lock name, Redisson's RFairLock: a
// reentrant lock granted in the order waiters arrived, across clients and
// processes. Waiters queue in Redis (LIST redisson_lock_queue:{name}, with
// deadlines in ZSET redisson_lock_timeout:{name}); a release tells only the
// head of the queue, on its own channel redisson_lock__channel:{name}:<owner>.
//
// A waiter that stops trying (its process died) keeps its place for
// Options.FairWaitTimeout and is then skipped. A waiter that gives up (its
// ctx ends, a wait limit runs out) leaves the queue at once. Deadlines are
// Redis server time; see docs/migrating-from-redisson.md for mixing with
// Java waiters.
func (c *Client) FairLock(name string) *Lock {
	return &Lock{c: c, name: name, kind: fairLock}
}
