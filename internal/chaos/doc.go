// Package chaos is relock's fault-injection suite: lock holders in separate
// processes, real redis-server faults, and checkers that judge the history
// instead of counting.
//
// Oracles: A, a fencing-checking store that refuses stale tokens and detects
// lost or duplicated increments; B, an overlap detector over the intervals
// each process believed it held the lock, on CLOCK_MONOTONIC (shared by all
// processes of a host); D, leaks (lock keys, channels) after the run.
//
// The suite runs when RELOCK_CHAOS=1 (see the README for the commands).
package chaos
