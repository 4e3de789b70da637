package scripts

import (
	"context"
	"crypto/rand"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// RRateLimiter (RedissonRateLimiter.java): the configuration hash N, and
// per type (OVERALL, or PER_CLIENT with the client's id) a value key and a
// ZSET window; see ratelib.lua. Nothing is published.

// rateLib holds the functions the rate limiter scripts share, and checks
// N's type; it is prepended to each body.
//
//go:embed ratelib.lua
var rateLib string

var (
	//go:embed rateacquire.lua
	rateAcquireLua    string
	rateAcquireScript = coalescible([]string{clockLib}, rateLib, rateAcquireLua)

	//go:embed rateavailable.lua
	rateAvailableLua    string
	rateAvailableScript = newScript(clockLib, rateLib, rateAvailableLua)

	//go:embed ratetryset.lua
	rateTrySetLua    string
	rateTrySetScript = newScript(clockLib, rateLib, rateTrySetLua)

	//go:embed rateset.lua
	rateSetLua    string
	rateSetScript = newScript(clockLib, rateLib, rateSetLua)

	//go:embed rateupdate.lua
	rateUpdateLua    string
	rateUpdateScript = newScript(clockLib, rateLib, rateUpdateLua)

	//go:embed raterelease.lua
	rateReleaseLua    string
	rateReleaseScript = newScript(clockLib, rateLib, rateReleaseLua)

	//go:embed rateconfig.lua
	rateConfigLua    string
	rateConfigScript = newScript(clockLib, rateLib, rateConfigLua)
)

// Rate is a rate limiter's configuration.
type Rate struct {
	Permits   int64         // per Interval
	Interval  time.Duration // whole milliseconds
	PerClient bool          // PER_CLIENT (type 1): each client has its own window
	KeepAlive time.Duration // the keys' TTL, renewed on use; 0: none
}

func (r Rate) args() []string {
	kind := "0"
	if r.PerClient {
		kind = "1"
	}
	return []string{itoa(r.Permits), millis(r.Interval), kind, millis(r.KeepAlive)}
}

// rateKeys returns rate limiter name's keys for client id.
func rateKeys(name, client string) []string {
	value, permits := suffixed(name, "value"), suffixed(name, "permits")
	return []string{name, value, suffixed(value, client), permits, suffixed(permits, client)}
}

// RateSet runs rateset.lua, or ratetryset.lua when only is set: it
// configures rate limiter name (only if it is not configured), and reports
// whether it did. Setting empties the window of r's type.
func RateSet(ctx context.Context, c Conn, name, client string, r Rate, only bool) (bool, error) {
	if only {
		res, syncErr := rateTrySetScript.exec(ctx, c, rateKeys(name, client)[:1], r.args())
		n, err := res.AsInt64()
		if err != nil {
			return false, err
		}
		return n == 1, okIf(n == 1, syncErr)
	}
	res, syncErr := rateSetScript.exec(ctx, c, rateKeys(name, client), r.args())
	if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
		return false, err
	}
	return true, syncErr
}

// RateAcquire runs rateacquire.lua: client takes n permits of rate limiter
// name's window, or none; then wait is how long until they may be there.
func RateAcquire(ctx context.Context, c Conn, name, client string, n int64) (acquired bool, wait time.Duration, err error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return false, 0, err
	}
	r, syncErr := rateAcquireScript.exec(ctx, c, rateKeys(name, client), []string{itoa(n), string(id[:])})
	ms, err := r.AsInt64()
	if rueidis.IsRedisNil(err) {
		return true, 0, syncErr
	}
	if err != nil {
		return false, 0, err
	}
	return false, time.Duration(ms) * time.Millisecond, nil
}

// RateAvailable runs rateavailable.lua: the permits client may take from
// rate limiter name's window now.
func RateAvailable(ctx context.Context, c Conn, name, client string) (int64, error) {
	r, _ := rateAvailableScript.exec(ctx, c, rateKeys(name, client), nil)
	return r.AsInt64()
}

// RateRelease runs raterelease.lua: client gives n permits back to rate
// limiter name's window, up to its rate.
func RateRelease(ctx context.Context, c Conn, name, client string, n int64) error {
	r, syncErr := rateReleaseScript.exec(ctx, c, rateKeys(name, client), []string{itoa(n)})
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		return err
	}
	return syncErr
}

// RateConfig runs rateconfig.lua: rate limiter name's configuration.
func RateConfig(ctx context.Context, c Conn, name string) (Rate, error) {
	r, _ := rateConfigScript.exec(ctx, Conn{Client: c.Client}, []string{name}, nil)
	fields, err := r.ToArray()
	if err != nil {
		return Rate{}, err
	}
	if len(fields) != 4 {
		return Rate{}, fmt.Errorf("rate limiter %q: %d fields, want 4", name, len(fields))
	}
	var n [4]int64
	for i := range fields {
		if n[i], err = fields[i].AsInt64(); err != nil && !(i == 3 && rueidis.IsRedisNil(err)) {
			return Rate{}, fmt.Errorf("rate limiter %q: field %d: %w", name, i, err)
		}
	}
	return Rate{Permits: n[0], Interval: time.Duration(n[1]) * time.Millisecond, PerClient: n[2] == 1, KeepAlive: time.Duration(n[3]) * time.Millisecond}, nil
}

// RateUpdate runs rateupdate.lua: rate limiter name, if configured, takes
// configuration r and keeps its window's state; it reports whether it was
// configured.
func RateUpdate(ctx context.Context, c Conn, name, client string, r Rate) (bool, error) {
	res, syncErr := rateUpdateScript.exec(ctx, c, rateKeys(name, client), r.args())
	n, err := res.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}
