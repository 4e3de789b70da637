package scripts

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
)

var (
	//go:embed tokenpast.lua
	tokenPastLua    string
	tokenPastScript = newScript(clockLib, tokenLib, tokenPastLua)
)

// TokenPast runs tokenpast.lua: when owner holds the fenced lock key, it
// draws a token for that hold above past (a token a fencing store
// refused owner's for) and returns it with true; false when owner does
// not hold the lock. The hold itself is unchanged.
func TokenPast(ctx context.Context, c Conn, key, owner string, past int64) (int64, bool, error) {
	res, syncErr := tokenPastScript.exec(ctx, c, []string{key, tokenCounter(key)},
		[]string{owner, strconv.FormatInt(past, 10), strconv.FormatInt(time.Now().UnixMicro(), 10)})
	r, err := res.ToArray()
	if err != nil {
		return 0, false, err
	}
	if len(r) != 2 {
		return 0, false, fmt.Errorf("tokenpast.lua: unexpected reply of %d values", len(r))
	}
	held, err := r[0].AsInt64()
	if err != nil {
		return 0, false, err
	}
	token, err := r[1].AsInt64()
	if err != nil {
		return 0, false, err
	}
	return token, held == 1, syncErr
}
