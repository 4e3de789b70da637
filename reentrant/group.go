package reentrant

import (
	"context"
	"slices"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// GroupLock returns a handle on the values of group lock group, Redisson's
// RedissonFasterMultiLock (getMultiLock(group, values), Redisson 3.38):
// one Redis hash per group, in which each value is held by one owner at a
// time. Lock takes every value at once or waits, so two calls whose
// values overlap exclude each other and two whose values are disjoint run
// side by side, at the cost of one key and one script per acquisition
// however many values there are. Holds are reentrant and kept by the
// watchdog; Unlock gives back one hold of every value. A waiter is woken
// by the release of the value that kept it out (one waiter of each
// client), or by any Java release in the group. Deadlock detection does
// not see group locks.
//
// A value is the bytes Redisson's codec writes for the Java object: for a
// Java String with StringCodec, its UTF-8 bytes, the Go string itself. Java
// clients must use such a codec to share values with Go (Redisson's
// default codec, Kryo5, writes a String differently). Each value is
// stored as the base64 of its HighwayHash-128, as Redisson does
// (docs/wire-format.md), so values may be of any length.
//
// The handle's values are fixed; handles with the same group and values,
// in any order and with repeats, are interchangeable. A call with no values
// fails with ErrInvalidArgument.
func (c *Client) GroupLock(group string, values ...string) *Lock {
	l := c.newLock(group, groupLock)
	l.fields = scripts.GroupFields(values)
	return l
}

// groupWakes reads Redisson's channel for a group lock's waiters. Java's
// releases say "0", for whatever values they freed, so that wakes them
// all; relock's say "00", and announce the values freed on their own
// channels (see blockedBy), so that passes.
func groupWakes(message string) int {
	if pubsub.LockWakes(message) != 0 {
		return pubsub.All
	}
	return 0
}

// groupValues reads who holds each of a group lock's values.
func (l *Lock) groupValues(ctx context.Context, op string) ([]scripts.GroupValue, error) {
	vals, err := scripts.GroupInspect(ctx, l.c.runner.conn(), l.name, l.fields)
	if err != nil {
		return nil, redisError(op, l.name, err)
	}
	return vals, nil
}

// groupHoldCount is HoldCount for a group lock: how many times owner holds
// every one of its values (the fewest of their counts).
func (l *Lock) groupHoldCount(ctx context.Context, owner Owner) (int, error) {
	vals, err := l.groupValues(ctx, "hold count")
	if err != nil {
		return 0, err
	}
	n := int64(-1)
	for _, v := range vals {
		if v.Holder != owner.id {
			return 0, nil
		}
		if n < 0 || v.Count < n {
			n = v.Count
		}
	}
	return int(max(n, 0)), nil
}

// groupLocked is IsLocked for a group lock: whether anyone holds any of its
// values (Redisson's isLocked).
func (l *Lock) groupLocked(ctx context.Context) (bool, error) {
	vals, err := l.groupValues(ctx, "is locked")
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(vals, func(v scripts.GroupValue) bool { return v.Holder != "" }), nil
}

// groupRemainTTL is RemainTTL for a group lock: how long until the last
// hold of its values ends, 0 when none is held.
func (l *Lock) groupRemainTTL(ctx context.Context) (time.Duration, error) {
	vals, err := l.groupValues(ctx, "remain ttl")
	if err != nil {
		return 0, err
	}
	var left time.Duration
	for _, v := range vals {
		left = max(left, v.Left)
	}
	return left, nil
}

// groupForceUnlock is ForceUnlock for a group lock: its values are freed
// whoever holds them, and this client's holds of any of them end.
func (l *Lock) groupForceUnlock(ctx context.Context) (bool, error) {
	l.c.holds.lose(func(k holdKey) bool {
		if k.name != l.name {
			return false
		}
		_, fields := splitHold(k.owner)
		return slices.ContainsFunc(fields, func(f string) bool {
			_, found := slices.BinarySearch(l.fields, f)
			return found
		})
	}, ErrLockLost)
	freed, err := scripts.GroupForceUnlock(ctx, l.c.runner.conn(), l.name, l.fields, l.c.publish)
	if err != nil {
		return false, redisError("force unlock", l.name, err)
	}
	return freed, nil
}
