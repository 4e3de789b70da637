package scripts

import (
	"context"
	_ "embed"
)

// RCountDownLatch (RedissonCountDownLatch.java): a string key N holding the
// count, and the channel redisson_countdownlatch__channel__{N} (braces
// always, even when N has its own), on which "0" opens the latch and "1"
// announces a new count.

var (
	//go:embed latchcountdown.lua
	latchCountDownLua    string
	latchCountDownScript = newScript(countLib, latchCountDownLua)

	//go:embed latchtryset.lua
	latchTrySetLua    string
	latchTrySetScript = newScript(countLib, latchTrySetLua)

	//go:embed latchdelete.lua
	latchDeleteLua    string
	latchDeleteScript = newScript(countLib, latchDeleteLua)
)

// LatchChannel returns the channel of latch name:
// redisson_countdownlatch__channel__{name}.
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// LatchCountDown runs latchcountdown.lua: it counts latch name down by one
// and returns the new count; at 0 the key is gone and the latch open.
func LatchCountDown(ctx context.Context, c Conn, name string, pub Publish) (int64, error) {
	r, syncErr := latchCountDownScript.exec(ctx, c, []string{name, LatchChannel(name)}, []string{string(pub)})
	n, err := r.AsInt64()
	if err != nil {
		return 0, err
	}
	return n, syncErr
}

// LatchTrySet runs latchtryset.lua: it sets the count of a latch that has
// none, and reports whether it did.
func LatchTrySet(ctx context.Context, c Conn, name string, count int64, pub Publish) (bool, error) {
	r, syncErr := latchTrySetScript.exec(ctx, c, []string{name, LatchChannel(name)}, []string{itoa(count), string(pub)})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}

// LatchDelete runs latchdelete.lua: it deletes latch name and reports
// whether it existed.
func LatchDelete(ctx context.Context, c Conn, name string, pub Publish) (bool, error) {
	r, syncErr := latchDeleteScript.exec(ctx, c, []string{name, LatchChannel(name)}, []string{string(pub)})
	n, err := r.AsInt64()
	if err != nil {
		return false, err
	}
	return n == 1, okIf(n == 1, syncErr)
}
