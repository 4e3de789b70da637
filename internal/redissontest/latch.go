package redissontest

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"
)

// Count-down latches as Redisson 4.7 keeps them
// (redisson/src/main/java/org/redisson/RedissonCountDownLatch.java): a
// string key N holding the count, and the channel
// redisson_countdownlatch__channel__{N}, "0" when the count reaches 0 and
// "1" when a count is set or the latch deleted (CountDownLatchPubSub).

// LatchChannel is RedissonCountDownLatch.getChannelName.
func LatchChannel(name string) string { return "redisson_countdownlatch__channel__{" + name + "}" }

// LatchTrySetCount is RedissonCountDownLatch.trySetCountAsync: when N does
// not exist, SET it to count and publish NEW_COUNT_MESSAGE ("1").
func (c *Client) LatchTrySetCount(ctx context.Context, name string, count int64) (bool, error) {
	var set bool
	err := c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		_, exists, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		if set = !exists; !set {
			return d.Do(ctx, d.B().Unwatch().Build()).Error()
		}
		return exec(ctx, d,
			d.B().Set().Key(name).Value(strconv.FormatInt(count, 10)).Build(),
			d.B().Publish().Channel(LatchChannel(name)).Message("1").Build())
	})
	return set, err
}

// LatchCountDown is RedissonCountDownLatch.countDownAsync: DECR; at or
// below 0, DEL; at exactly 0, publish ZERO_COUNT_MESSAGE ("0").
func (c *Client) LatchCountDown(ctx context.Context, name string) error {
	return c.atomically(ctx, name, func(d rueidis.DedicatedClient) error {
		value, _, err := getInt(ctx, d, name)
		if err != nil {
			return err
		}
		cmds := []rueidis.Completed{d.B().Decr().Key(name).Build()}
		if value-1 <= 0 {
			cmds = append(cmds, d.B().Del().Key(name).Build())
		}
		if value-1 == 0 {
			cmds = append(cmds, d.B().Publish().Channel(LatchChannel(name)).Message("0").Build())
		}
		return exec(ctx, d, cmds...)
	})
}

// LatchCount is RedissonCountDownLatch.getCountAsync: GET N, 0 when missing.
func (c *Client) LatchCount(ctx context.Context, name string) (int64, error) {
	n, err := c.rdb.Do(ctx, c.rdb.B().Get().Key(name).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}

// LatchAwait is RedissonCountDownLatch.await(): if the count is 0, return;
// subscribe; while the count is above 0, block on the entry's latch with no
// timeout, which only "0" opens (CountDownLatchPubSub.onMessage). Only ctx
// bounds the wait: a Java waiter never re-reads the count on its own.
func (c *Client) LatchAwait(ctx context.Context, name string) error {
	return c.waitForMessage(ctx, LatchChannel(name), func(m string) bool { return m == "0" }, func() (bool, error) {
		n, err := c.LatchCount(ctx, name)
		return n == 0, err
	})
}
