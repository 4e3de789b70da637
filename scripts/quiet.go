package scripts

import (
	"context"
	_ "embed"
	"strconv"
	"time"
)

var (
	//go:embed quietmark.lua
	quietMarkLua    string
	quietMarkScript = newScript(quietMarkLua)
	//go:embed quietunmark.lua
	quietUnmarkLua    string
	quietUnmarkScript = newScript(quietUnmarkLua)
)

// QuietMarker returns the key of lock name's quiet marker:
// relock_quiet:{name}.
func QuietMarker(name string) string { return prefixed("relock_quiet", name) }

// QuietMark runs quietmark.lua: owner, holding lock key, marks it quiet
// for quiet past its TTL (0 returned), or learns that another owner's hold
// ended unreleased and its quiet period has wait left (wait > 0). held is
// false when owner does not hold the lock.
func QuietMark(ctx context.Context, c Conn, key, owner string, quiet time.Duration) (wait time.Duration, held bool, err error) {
	res, syncErr := quietMarkScript.exec(ctx, c, []string{key, QuietMarker(key)}, []string{owner, strconv.FormatInt(quiet.Milliseconds(), 10)})
	n, err := res.AsInt64()
	switch {
	case err != nil:
		return 0, false, err
	case n < 0:
		return 0, false, syncErr
	}
	return time.Duration(n) * time.Millisecond, true, syncErr
}

// QuietUnmark runs quietunmark.lua: owner's marker of lock key is deleted.
func QuietUnmark(ctx context.Context, c Conn, key, owner string) error {
	res, syncErr := quietUnmarkScript.exec(ctx, c, []string{QuietMarker(key)}, []string{owner})
	if err := res.Error(); err != nil {
		return err
	}
	return syncErr
}
