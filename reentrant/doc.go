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
// Make one [Client] per rueidis client with [New], and share it. In a
// handler, get a [Lock] handle by name and take it:
//
//	func handle(ctx context.Context, locks *reentrant.Client) error {
//		mu := locks.Lock("order:42")
//		held, err := mu.Lock(ctx) // blocks until held, or ctx ends
//		if err != nil {
//			return err
//		}
//		defer mu.Unlock(held) // the context Lock returned, not ctx
//		return charge(held)   // held is cancelled if the lock is lost
//	}
//
// The context Lock returns carries the owner, so a call made with it re-enters
// the lock instead of blocking on itself, and it is cancelled when the hold
// ends: by Unlock, by Close, or as soon as the client learns that the lock
// may be lost (cause [ErrLockLost]). Do the work under the lock with that
// context.
//
// [Lock.TryLock] waits at most as long as asked and reports whether it got
// the lock; [Client.Do] takes a lock, runs a func under it and releases it:
//
//	func tryHandle(ctx context.Context, locks *reentrant.Client) error {
//		mu := locks.Lock("order:42")
//		held, ok, err := mu.TryLock(ctx, reentrant.WaitAtMost(time.Second))
//		switch {
//		case err != nil:
//			return err // Redis could not be reached, or refused
//		case !ok:
//			return errBusy // another held it for all of a second
//		}
//		defer mu.Unlock(held)
//		return charge(held)
//	}
//
//	func nightlyReport(ctx context.Context, locks *reentrant.Client) error {
//		return locks.Do(ctx, "nightly-report", func(ctx context.Context) error {
//			return report(ctx) // ctx is cancelled if the lock is lost
//		})
//	}
//
// Waiters block without polling: a release wakes them. A plain or fenced
// lock's release tells one waiting relock client, the one waiting longest,
// on its own channel, as well as publishing Redisson's message for Java
// waiters, so a handoff costs the same however many processes wait
// (docs/waiting.md).
//
// Every kind comes from the same Client, on Redisson's keys and channels,
// and waits, wakes and renews on its one pub/sub connection and one
// watchdog:
//   - [Client.Lock]: the reentrant lock (RLock).
//   - [Client.FairLock]: first come, first served (RFairLock).
//   - [Client.ReadWriteLock]: many readers or one writer (RReadWriteLock).
//   - [Client.FencedLock]: a lock whose every hold has a token that grows
//     (RFencedLock; docs/fencing.md).
//   - [Client.SpinLock]: waits by backing off, not by subscribing
//     (RSpinLock).
//   - [Client.NonReentrantLock], [Client.NonReentrantFairLock]: a holder's
//     second take is an error (Redisson 4.4).
//   - [Client.GroupLock]: every value of a set at once, which overlapping
//     sets exclude (Redisson's getMultiLock(group, values)).
//   - [NewMultiLock], [NewRedlock]: all of several locks, or a majority
//     of independent servers (RedissonMultiLock, RedissonRedLock).
//   - [Client.PriorityLock]: waiters served by priority, with aging; not
//     in Redisson (docs/priority.md).
//   - [Client.Semaphore], [Client.PermitExpirableSemaphore] (whose permits
//     without a lease the watchdog keeps), [Client.CountDownLatch],
//     [Client.RateLimiter]: Redisson's synchronizers (docs/synchronizers.md).
//
// A Lock call whose owner holds other locks detects a cycle of owners
// waiting for each other and fails with [ErrDeadlock] (docs/deadlocks.md).
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
