package reentrant

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant/internal/addon"
)

// The add-ons (election, events) reach a Client's runner through package
// addon, which they may import and users may not.
func init() {
	addon.Of = func(v any) (addon.Runtime, bool) {
		c, ok := v.(*Client)
		if !ok || !c.usable() {
			return addon.Runtime{}, false
		}
		return addon.Runtime{
			Conn:    c.runner.Conn,
			Publish: c.publish,
			Closing: c.closing,
			Go:      c.background,
			Repoll:  c.opts.RepollInterval,
			Logger:  c.opts.Logger,
			Guard:   c.holds.guard,
			Key:     c.key,
			Fail:    redisError,
			WithToken: func(ctx context.Context, token int64) context.Context {
				return context.WithValue(ctx, tokenKey{}, token)
			},
			LockAt: func(key string) any { return lockAt(c, key) },
			GiveAway: func(held context.Context, pass func(context.Context, string, string, time.Duration) error) error {
				return giveAway(c, held, pass)
			},
		}, true
	}
}

// Rueidis returns the rueidis client c was made with (nil for a nil
// Client), for code built on c that sends commands of its own. Commands
// sent on it bypass what c does for its scripts: replica sync, coalescing,
// and the checks of Close.
func (c *Client) Rueidis() rueidis.Client {
	if c == nil {
		return nil
	}
	return c.rdb
}
