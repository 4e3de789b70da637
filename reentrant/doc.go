// Package reentrant provides distributed, reentrant locks and
// synchronizers on Redis that are wire-compatible with Java Redisson's
// RLock family, RSemaphore, RPermitExpirableSemaphore, RCountDownLatch and
// RRateLimiter.
//
// A lock is a Redis hash: its field is the holder's [Owner], its value the
// hold count, its TTL the lease. Only small Lua scripts change it (package
// scripts), so Go services using this package and Java services using
// Redisson 3.22+ can share the same locks.
//
// Make one [Client] per rueidis client, get a [Lock] handle by name, and take
// it:
//
//	locks, err := reentrant.New(rdb, reentrant.Options{})
//	...
//	defer locks.Close()
//
//	mu := locks.Lock("order:42")
//	held, err := mu.Lock(ctx) // blocks until held or ctx ends
//	if err != nil { ... }
//	defer mu.Unlock(held) // the context Lock returned, not ctx
//
// The context Lock returns carries the owner, so a call made with it re-enters
// the lock instead of blocking on itself, and it is cancelled when the hold
// ends: by Unlock, by Close, or as soon as the client learns that the lock
// may be lost (cause [ErrLockLost]). Do the work under the lock with that
// context.
//
// Waiters block without polling: a release wakes them. A plain or fenced
// lock's release tells one waiting relock client, the one waiting longest,
// on its own channel, as well as publishing Redisson's message for Java
// waiters, so a handoff costs the same however many processes wait
// (docs/waiting.md).
//
// The same Client makes Redisson's synchronizers, on Redisson's keys and
// channels: [Semaphore], [PermitExpirableSemaphore] (whose permits without a
// lease the watchdog keeps, as it keeps locks), [CountDownLatch] and
// [RateLimiter]. They wait, wake and renew as locks do, on the Client's one
// pub/sub connection and one watchdog.
//
// Beyond Redisson's kinds ([Client.Lock], [Client.FairLock],
// [Client.FencedLock], [Client.ReadWriteLock], [Client.SpinLock],
// [Client.NonReentrantLock], [Client.GroupLock], [NewMultiLock], [NewRedlock]):
// [Client.PriorityLock] serves waiters by priority with aging, and a Lock
// call whose owner holds other locks detects a cycle of owners waiting for
// each other and fails with [ErrDeadlock] (docs/deadlocks.md).
// [FromRedissonConfig] reads a Java service's Redisson YAML; package
// reentranttest runs all of it on an embedded miniredis for unit tests.
//
// Owners can be made explicit to hand a hold to another goroutine or process:
// [Client.NewOwner], [WithOwner], [Owner.String] and [ParseOwner].
//
// A Client works the same on one Redis, Sentinel and Redis Cluster (whatever
// the rueidis client connects to). [Options.ReplicaSync] makes acquires wait
// for replicas, so a failover cannot lose a lock no replica has; see
// docs/deployment.md.
package reentrant
