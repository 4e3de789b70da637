package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// IsLocked reports whether anyone holds the lock; for a group lock, any of
// its values (Redisson's isLocked). A key of another type than a lock's
// hash is ErrWrongType.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	if err := l.check(ctx, nil); err != nil {
		return false, err
	}
	if l.kind == groupLock {
		return l.groupLocked(ctx)
	}
	t, err := l.c.rdb.Do(ctx, l.c.rdb.B().Type().Key(l.name).Build()).ToString()
	switch {
	case err != nil:
		return false, redisError("is locked", l.name, err)
	case t == "none":
		return false, nil
	case t != "hash":
		return false, fmt.Errorf("relock: is locked %q: %w (a %s)", l.name, ErrWrongType, t)
	}
	return true, nil
}

// IsHeld reports whether ctx's owner holds the lock. A ctx without an owner
// holds nothing.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many times ctx's owner holds the lock, as Redis
// counts it (0 when it does not); for a group lock, the fewest of its
// counts among the values, 0 unless it holds them all.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	if err := l.check(ctx, nil); err != nil {
		return 0, err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return 0, nil
	}
	if l.kind == groupLock {
		return l.groupHoldCount(ctx, owner)
	}
	n, err := l.c.rdb.Do(ctx, l.c.rdb.B().Hget().Key(l.name).Field(l.field(owner)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, redisError("hold count", l.name, err)
	}
	return int(n), nil
}

// RemainTTL returns how long the lock's key has left to live: 0 when the
// lock is free, NoExpiry when the key has no TTL; for a group lock, how
// long until the last hold of its values ends. A key of another type
// than a lock's hash is ErrWrongType.
func (l *Lock) RemainTTL(ctx context.Context) (time.Duration, error) {
	if err := l.check(ctx, nil); err != nil {
		return 0, err
	}
	if l.kind == groupLock {
		return l.groupRemainTTL(ctx)
	}
	rs := l.c.rdb.DoMulti(ctx, l.c.rdb.B().Type().Key(l.name).Build(), l.c.rdb.B().Pttl().Key(l.name).Build())
	t, err := rs[0].ToString()
	if err != nil {
		return 0, redisError("remain ttl", l.name, err)
	}
	if t != "hash" && t != "none" {
		return 0, fmt.Errorf("relock: remain ttl %q: %w (a %s)", l.name, ErrWrongType, t)
	}
	ms, err := rs[1].AsInt64()
	if err != nil {
		return 0, redisError("remain ttl", l.name, err)
	}
	switch ms {
	case -2:
		return 0, nil
	case -1:
		return NoExpiry, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ForceUnlock releases the lock whoever holds it and wakes a waiter; it
// reports whether the lock was held. With Options.ReplicaSync it waits for
// the replicas as a release does; a deletion they did not confirm still
// stands on the master (a failover before they have it can bring the lock
// back until its TTL ends). This client's own holds of it end at
// once: their held contexts are cancelled with cause ErrLockLost. A key of
// another type is left alone and reported as ErrWrongType; a hash is taken
// for a lock without a look at its fields, as Redisson does, so point
// ForceUnlock at lock names only. A group lock's ForceUnlock frees just
// its values, whoever holds them (Redisson's forceUnlock).
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	if err := l.check(ctx, nil); err != nil {
		return false, err
	}
	if l.kind == groupLock {
		return l.groupForceUnlock(ctx)
	}
	l.c.holds.lose(func(k holdKey) bool { return k.name == l.name }, ErrLockLost)
	deleted, err := l.kind.spec().forceUnlock(ctx, l.c.runner.conn(), l.name, l.c.publish, l.directed())
	if err != nil {
		return false, redisError("force unlock", l.name, err)
	}
	return deleted, nil
}
