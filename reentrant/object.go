package reentrant

import (
	"context"
	"fmt"
	"time"

	"github.com/relock-go/relock/scripts"
)

// object is a synchronizer as Redisson's RObject and RExpirable see it:
// its keys, its name first, on which Delete, Expire, ClearExpire and
// Exists act all at once, as the Java class's overrides do. Each
// synchronizer type makes one per call, after checking its handle.
type object struct {
	c    *Client
	what string // "semaphore", "latch", "rate limiter": for errors
	keys []string
	err  error // the handle's check: when set, nothing is sent
}

func (o object) name() string { return o.keys[0] }

// delete deletes every key and reports whether any existed.
func (o object) delete(ctx context.Context) (bool, error) {
	if o.err != nil {
		return false, o.err
	}
	deleted, err := scripts.Delete(ctx, o.c.runner.Conn(), o.keys)
	return deleted, changeError(o.what, o.name(), err)
}

// expire sets every key's time to live to ttl (0: clears it) and reports
// whether any key exists to take it.
func (o object) expire(ctx context.Context, ttl time.Duration) (bool, error) {
	if o.err != nil {
		return false, o.err
	}
	changed, err := scripts.Expire(ctx, o.c.runner.Conn(), o.keys, ttl)
	return changed, changeError(o.what, o.name(), err)
}

// expireAfter is expire for a ttl the caller gave: at least 1ms (PEXPIRE
// with 0 would delete the keys).
func (o object) expireAfter(ctx context.Context, ttl time.Duration) (bool, error) {
	if o.err == nil && ttl < time.Millisecond {
		return false, fmt.Errorf("relock: %w: time to live %v, want at least 1ms", ErrInvalidArgument, ttl)
	}
	return o.expire(ctx, ttl)
}

// exists reports whether the name's key exists, as Java's isExists.
func (o object) exists(ctx context.Context) (bool, error) {
	if o.err != nil {
		return false, o.err
	}
	found, err := scripts.Exists(ctx, o.c.runner.Conn(), o.name())
	if err != nil {
		return false, redisError(o.what, o.name(), err)
	}
	return found, nil
}
