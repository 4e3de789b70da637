package scripts

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// RSemaphore (RedissonSemaphore.java): a string key N holding the
// available permits, and the channel redisson_sc:{N}, on which every
// increase publishes the new total.

var (
	//go:embed semacquire.lua
	semAcquireLua    string
	semAcquireScript = coalescible(nil, countLib, semAcquireLua)

	//go:embed semrelease.lua
	semReleaseLua    string
	semReleaseScript = coalescible(nil, countLib, semReleaseLua)

	//go:embed semtryset.lua
	semTrySetLua    string
	semTrySetScript = newScript(countLib, semTrySetLua)

	//go:embed semdrain.lua
	semDrainLua    string
	semDrainScript = newScript(countLib, semDrainLua)
)

// SemaphoreChannel returns the channel of semaphore name (both kinds):
// redisson_sc:{name}.
func SemaphoreChannel(name string) string { return prefixed("redisson_sc", name) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// SemaphoreAcquire runs semacquire.lua: it takes n permits of semaphore
// name, or none, and reports whether it took them.
func SemaphoreAcquire(ctx context.Context, c Conn, name string, n int64) (bool, error) {
	r, syncErr := semAcquireScript.exec(ctx, c, []string{name}, []string{itoa(n)})
	got, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return got == 1, okIf(got == 1, syncErr)
}

// SemaphoreRelease runs semrelease.lua: it adds n permits (n < 0 takes them
// off) and publishes the new total when it is above 0. It returns the new
// total.
func SemaphoreRelease(ctx context.Context, c Conn, name string, n int64, pub Publish) (int64, error) {
	r, syncErr := semReleaseScript.exec(ctx, c, []string{name, SemaphoreChannel(name)}, []string{itoa(n), string(pub), ""})
	total, err := r.AsInt64()
	if err != nil {
		return 0, err
	}
	return total, syncErr
}

// SemaphoreReleaseIfExists runs semrelease.lua as releaseIfExists: it adds
// n permits only when the semaphore's key exists, and reports whether it
// did.
func SemaphoreReleaseIfExists(ctx context.Context, c Conn, name string, n int64, pub Publish) (bool, error) {
	r, syncErr := semReleaseScript.exec(ctx, c, []string{name, SemaphoreChannel(name)}, []string{itoa(n), string(pub), "1"})
	switch _, err := r.AsInt64(); {
	case rueidis.IsRedisNil(err):
		return false, nil // no key: nothing written, nothing to confirm
	case err != nil:
		return false, err
	}
	return true, syncErr
}

// SemaphoreTrySet runs semtryset.lua: it sets the permits of a semaphore
// (either kind) that has none yet, to expire after ttl when ttl > 0, and
// reports whether it did.
func SemaphoreTrySet(ctx context.Context, c Conn, name string, n int64, ttl time.Duration, pub Publish) (bool, error) {
	px := ""
	if ttl > 0 {
		px = millis(ttl)
	}
	r, syncErr := semTrySetScript.exec(ctx, c, []string{name, SemaphoreChannel(name)}, []string{itoa(n), string(pub), px})
	set, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return set == 1, okIf(set == 1, syncErr)
}

// SemaphoreDrain runs semdrain.lua: it takes every available permit and
// returns how many there were.
func SemaphoreDrain(ctx context.Context, c Conn, name string) (int64, error) {
	r, syncErr := semDrainScript.exec(ctx, c, []string{name}, nil)
	n, err := r.AsInt64()
	if err != nil {
		return 0, err
	}
	return n, okIf(n != 0, syncErr)
}

// okIf returns syncErr when the script changed something, else nil: there
// is nothing to confirm.
func okIf(changed bool, syncErr error) error {
	if changed {
		return syncErr
	}
	return nil
}

var (
	//go:embed count.lua
	countLua    string
	countScript = newScript(countLib, countLua)
)

// Count runs count.lua: the integer in key, 0 when it is missing.
func Count(ctx context.Context, c Conn, key string) (int64, error) {
	r, _ := countScript.exec(ctx, Conn{Client: c.Client}, []string{key}, nil)
	return r.AsInt64()
}
