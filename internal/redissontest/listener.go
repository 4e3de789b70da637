package redissontest

import (
	"context"

	"github.com/redis/rueidis"
)

// Redisson's object listeners' pattern topics (RedissonObject.addListener:
// "__keyevent@*:expired" for an ExpiredObjectListener, "__keyevent@*:del"
// for a DeletedObjectListener).
const (
	expiredPattern = "__keyevent@*:expired"
	deletedPattern = "__keyevent@*:del"
)

// AddObjectListeners is RObject.addListener of an ExpiredObjectListener
// and a DeletedObjectListener on name (RedissonObject.addListener): each
// pattern is subscribed (RedissonPatternTopic.addListener), and a
// message is the listener's call when it equals the object's raw name
// (RedissonObject.addListener's condition m.equals(getRawName())). The
// channel receives "expired" for each onExpired and "deleted" for each
// onDeleted, until ctx ends. Both patterns share one connection here, so
// their calls come in the server's order.
func (c *Client) AddObjectListeners(ctx context.Context, name string) (<-chan string, error) {
	d, release := c.rdb.Dedicate()
	calls := make(chan string, 1000)
	closed := d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		if m.Message != name {
			return
		}
		if m.Pattern == expiredPattern {
			calls <- "expired"
		} else {
			calls <- "deleted"
		}
	}})
	if err := d.Do(ctx, d.B().Psubscribe().Pattern(expiredPattern, deletedPattern).Build()).Error(); err != nil {
		d.Close()
		release()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-closed:
		}
		d.Close()
		release()
	}()
	return calls, nil
}
