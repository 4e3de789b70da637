package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// A reader answers a Lock's inspections (IsLocked, HoldCount, RemainTTL)
// and its ForceUnlock from Redis: hashReader for a lock that is Redisson's
// hash, groupReader (group.go) for a group lock's values in theirs. The
// handle's constructor picks it; the caller checked r and ctx.
type reader interface {
	locked(ctx context.Context, r *lockRef) (bool, error)
	holdCount(ctx context.Context, r *lockRef, owner Owner) (int, error)
	remainTTL(ctx context.Context, r *lockRef) (time.Duration, error)
	forceUnlock(ctx context.Context, r *lockRef) (bool, error)
}

// hashReader reads a lock that is one hash: its key's type and TTL, and
// its owner's field.
type hashReader struct{}

func (hashReader) locked(ctx context.Context, r *lockRef) (bool, error) {
	t, err := r.c.rdb.Do(ctx, r.c.rdb.B().Type().Key(r.name).Build()).ToString()
	switch {
	case err != nil:
		return false, redisError("is locked", r.name, err)
	case t == "none":
		return false, nil
	case t != "hash":
		return false, fmt.Errorf("relock: is locked %q: %w (a %s)", r.name, ErrWrongType, t)
	}
	return true, nil
}

func (hashReader) holdCount(ctx context.Context, r *lockRef, owner Owner) (int, error) {
	n, err := r.c.rdb.Do(ctx, r.c.rdb.B().Hget().Key(r.name).Field(r.field(owner)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, redisError("hold count", r.name, err)
	}
	return int(n), nil
}

func (hashReader) remainTTL(ctx context.Context, r *lockRef) (time.Duration, error) {
	rs := r.c.rdb.DoMulti(ctx, r.c.rdb.B().Type().Key(r.name).Build(), r.c.rdb.B().Pttl().Key(r.name).Build())
	t, err := rs[0].ToString()
	if err != nil {
		return 0, redisError("remain ttl", r.name, err)
	}
	if t != "hash" && t != "none" {
		return 0, fmt.Errorf("relock: remain ttl %q: %w (a %s)", r.name, ErrWrongType, t)
	}
	ms, err := rs[1].AsInt64()
	if err != nil {
		return 0, redisError("remain ttl", r.name, err)
	}
	switch ms {
	case -2:
		return 0, nil
	case -1:
		return NoExpiry, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// forceUnlock deletes the key whoever holds it, with the kind's script,
// after this client's holds of it end.
func (hashReader) forceUnlock(ctx context.Context, r *lockRef) (bool, error) {
	r.c.holds.lose(func(k holdKey) bool { return k.name == r.name }, ErrLockLost)
	deleted, err := r.row.forceUnlock(ctx, r.c.runner.Conn(), r.name, r.c.publish, r.directed())
	if err != nil {
		return false, redisError("force unlock", r.name, err)
	}
	return deleted, nil
}
