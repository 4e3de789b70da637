package reentrant

import (
	"context"
	"slices"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

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
func (l *lockRef) groupValues(ctx context.Context, op string) ([]scripts.GroupValue, error) {
	vals, err := scripts.GroupInspect(ctx, l.c.runner.conn(), l.name, l.fields)
	if err != nil {
		return nil, redisError(op, l.name, err)
	}
	return vals, nil
}

// groupHoldCount is HoldCount for a group lock: how many times owner holds
// every one of its values (the fewest of their counts).
func (l *lockRef) groupHoldCount(ctx context.Context, owner Owner) (int, error) {
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
func (l *lockRef) groupLocked(ctx context.Context) (bool, error) {
	vals, err := l.groupValues(ctx, "is locked")
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(vals, func(v scripts.GroupValue) bool { return v.Holder != "" }), nil
}

// groupRemainTTL is RemainTTL for a group lock: how long until the last
// hold of its values ends, 0 when none is held.
func (l *lockRef) groupRemainTTL(ctx context.Context) (time.Duration, error) {
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
func (l *lockRef) groupForceUnlock(ctx context.Context) (bool, error) {
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
