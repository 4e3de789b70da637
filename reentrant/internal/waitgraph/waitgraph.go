// Package waitgraph reads the waits-for graph that deadlock detection
// follows: each owner's registered wait (relock_wait:{<owner>} ->
// "<since, ms>:<lock>") and each lock's holders (its hash's fields that are
// owners). Every read is a single-key command, so edges and locks may live
// in any cluster slot. It only reads; registering a wait is the waiter's.
package waitgraph

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// Edge is one edge of the graph: owner Waiter waits for Lock, which Holder
// holds, since Since (on the waiter's clock). reentrant.WaitEdge has the
// same fields, and converts.
type Edge struct {
	Waiter, Lock, Holder string
	Since                time.Time
}

// maxOwners bounds how many owners one search visits (InnoDB stops at
// 200): a longer chain is taken for no deadlock.
const maxOwners = 64

// Reader reads the graph from Redis.
type Reader struct {
	rdb rueidis.Client
	// owner reads a lock hash's field: the owner that holds the lock, or
	// false for a field that names none.
	owner func(field string) (string, bool)
}

// New returns a reader on rdb that reads holders' fields with owner.
func New(rdb rueidis.Client, owner func(field string) (string, bool)) Reader {
	return Reader{rdb: rdb, owner: owner}
}

// Cycle follows waits-for edges from self, which waits for lock since
// since, and returns the first cycle back to self, starting with self's
// edge, or nil. A lock or a wait that cannot be read ends that path.
func (r Reader) Cycle(ctx context.Context, self, lock string, since time.Time) []Edge {
	seen := map[string]bool{self: true}
	var walk func(waiter, lock string, since time.Time, path []Edge) []Edge
	walk = func(waiter, lock string, since time.Time, path []Edge) []Edge {
		holders, err := r.Holders(ctx, lock)
		if err != nil {
			return nil
		}
		for _, h := range holders {
			edge := append(path[:len(path):len(path)], Edge{waiter, lock, h, since})
			if h == self {
				return edge
			}
			if seen[h] || len(seen) >= maxOwners {
				continue
			}
			seen[h] = true
			next, nextSince, ok, _ := r.WaitOf(ctx, h)
			if !ok {
				continue
			}
			if cyc := walk(h, next, nextSince, edge); cyc != nil {
				return cyc
			}
		}
		return nil
	}
	return walk(self, lock, since, nil)
}

// StillTrue reads cyc's edges again: each waiter but the first (the one
// asking) still waits for the same lock since the same time, and each lock
// is still held by the same holder. An edge that changed (a holder that
// released, a waiter that was served or gave up) breaks the cycle.
func (r Reader) StillTrue(ctx context.Context, cyc []Edge) bool {
	for i, e := range cyc {
		if i > 0 {
			lock, since, ok, _ := r.WaitOf(ctx, e.Waiter)
			if !ok || lock != e.Lock || !since.Equal(e.Since) {
				return false
			}
		}
		holders, err := r.Holders(ctx, e.Lock)
		if err != nil || !slices.Contains(holders, e.Holder) {
			return false
		}
	}
	return true
}

// WaitOf reads owner's registered wait: the lock it waits for, since when,
// and ok false when there is none; err is what kept it from being read.
func (r Reader) WaitOf(ctx context.Context, owner string) (lock string, since time.Time, ok bool, err error) {
	v, err := r.rdb.Do(ctx, r.rdb.B().Get().Key(scripts.WaitEdgeKey(owner)).Build()).ToString()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			err = nil
		}
		return "", time.Time{}, false, err
	}
	lock, since, ok = parse(v)
	return lock, since, ok, nil
}

// parse parses a registered wait, "<since, ms>:<lock>".
func parse(v string) (lock string, since time.Time, ok bool) {
	ms, lock, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return "", time.Time{}, false
	}
	return lock, time.UnixMilli(n), true
}

// Holders reads the owners that hold lock: the fields of its hash that
// are owners with a count above 0, each once, in order. A count of 0 is a
// lock kept for an owner that has not taken it yet (an election's
// handover to a named successor): that owner's next attempt takes it, so
// it waits for nobody, itself included.
func (r Reader) Holders(ctx context.Context, lock string) ([]string, error) {
	// HGETALL, not HKEYS, which the acquire scripts run: the server's
	// command counts tell detection's reads apart (TestDeadlockCost).
	fields, err := r.rdb.Do(ctx, r.rdb.B().Hgetall().Key(lock).Build()).AsStrMap()
	if err != nil && !rueidis.IsRedisNil(err) {
		return nil, err
	}
	var holders []string
	for f, count := range fields {
		if count == "0" {
			continue
		}
		if owner, ok := r.owner(f); ok && !slices.Contains(holders, owner) {
			holders = append(holders, owner)
		}
	}
	slices.Sort(holders)
	return holders, nil
}
