// Package chaos is relock's fault-injection suite: lock holders in separate
// processes, real redis-server faults, network faults from in-process
// proxies (one per worker, so one worker can be cut off while the others go
// on), and checkers that judge the history instead of counting.
//
// Workloads, one run each: the fenced lock, the plain lock, the
// non-reentrant lock (each acquisition a new owner), the read-write
// lock (7 reads in 10), the fair lock (half its acquisitions through the
// non-reentrant fair lock, which shares its keys), the priority lock (each acquisition
// at one of four priorities), two plain locks taken by one owner in a
// random order, so that workers deadlock ("deadlock"), or always in the
// same order ("ordered"), a permit-expirable semaphore, latch
// rounds, an election (campaign, resign; its term fences the store as the
// fenced lock's token does), and, only when named (RELOCK_CHAOS_WORKLOADS=herd), the herd: the
// plain lock with 16 processes, most of them waiting at any time. Faults include a force unlock, a partition of the
// holder whose renewal replies first come late, and Redis's wall clock
// jumping forward or stepping back (alone, or as Redis comes back without
// its data), through redistest.StartClocked.
//
// Oracles: T, for the fenced lock and the election, tokens only grow: an
// acquisition begun after another returned drew a larger token, through
// data losses and clocks stepped back; A, a fencing-checking store that refuses stale tokens and detects
// lost or duplicated increments (strict for the fenced lock and the
// election; for the others
// only without the inherent faults); B, an overlap detector over the
// intervals each process believed it held the lock (read holds may share
// it), on CLOCK_MONOTONIC (shared by all processes of a host); C, the
// linearizability of the lock history against a mutex model that allows
// unknown outcomes (porcupine; not for the read-write lock); D, leaks (lock
// keys, queues, channels, goroutines) after the run; E, liveness: no wait
// longer than the holds and faults around it explain; F, for the fair and
// priority locks, waiters served in queue order (a priority lock's queue is
// ordered by place, which arrivals never change for those already queued),
// but for one whose turn or window ran out (its drop from the queue seen on
// the wire) or whose grant ran out before it took it; G, for the two-lock
// workloads, every deadlock ended within DeadlockTimeout and a re-poll,
// every ErrDeadlock named a cycle that was there, and none came when the
// locks are always taken in one order; S, never more permits in use than the
// semaphore has; L, no latch opens early, and every round opens; O, for
// the election, every leader an observer (on Redis directly, through every
// fault) was shown was a worker's, and it shows nobody leading once every
// hold is gone.
//
// The suite runs when RELOCK_CHAOS=1 (see docs/safety.md for the commands);
// RELOCK_CHAOS_TRACE=DIR writes what each worker sent, heard and was told,
// for reading a failure against.
package chaos
