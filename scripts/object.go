package scripts

import (
	"context"
	_ "embed"
	"time"
)

// RObject and RExpirable (RedissonObject.java, RedissonExpirable.java):
// what every Redisson object offers on its keys. An object of several keys
// passes them all, its name first, as the Java class's overrides of
// deleteAsync, expireAsync and clearExpireAsync do. Every key of one
// object is in its name's slot: Redisson derives them with suffixName.

var (
	//go:embed expire.lua
	expireLua    string
	expireScript = newScript(expireLua)

	//go:embed exists.lua
	existsLua    string
	existsScript = newScript(existsLua)
)

// PermitKeys returns the keys of permit-expirable semaphore name, as
// RedissonPermitExpirableSemaphore.deleteAsync lists them: the name and
// {name}:timeout.
func PermitKeys(name string) []string { return permitKeys(name)[:2] }

// RateKeys returns the keys of rate limiter name as client sees them, as
// RedissonRateLimiter.deleteAsync lists them: the configuration, the
// shared value and window, and client's own value and window.
func RateKeys(name, client string) []string { return rateKeys(name, client) }

// Delete runs DEL on keys (RedissonObject.deleteAsync) and reports whether
// any of them existed.
func Delete(ctx context.Context, c Conn, keys []string) (bool, error) {
	n, err := c.Do(ctx, c.B().Del().Key(keys...).Build()).AsInt64()
	return n > 0, err
}

// Expire runs expire.lua: every key of keys expires after ttl, or, when ttl
// is 0, never (PERSIST). It reports whether any key's time to live changed.
func Expire(ctx context.Context, c Conn, keys []string, ttl time.Duration) (bool, error) {
	arg := ""
	if ttl > 0 {
		arg = millis(ttl)
	}
	r, syncErr := expireScript.exec(ctx, c, keys, []string{arg})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// Exists runs exists.lua: whether key name exists.
func Exists(ctx context.Context, c Conn, name string) (bool, error) {
	r, _ := existsScript.exec(ctx, Conn{Client: c.Client}, []string{name}, nil)
	n, err := r.AsInt64()
	return n == 1, err
}
