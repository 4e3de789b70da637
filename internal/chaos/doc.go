// Package chaos is relock's fault-injection suite: lock holders in separate
// processes, real redis-server faults, network faults from an in-process
// proxy, and checkers that judge the history instead of counting.
//
// Oracles: A, a fencing-checking store that refuses stale tokens and detects
// lost or duplicated increments; B, an overlap detector over the intervals
// each process believed it held the lock, on CLOCK_MONOTONIC (shared by all
// processes of a host); C, the linearizability of the lock history against a
// mutex model that allows unknown outcomes (porcupine); D, leaks (lock keys,
// channels, goroutines) after the run.
//
// The suite runs when RELOCK_CHAOS=1 (see docs/safety.md for the commands).
package chaos
