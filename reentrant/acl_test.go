package reentrant_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// leastPrivilege is the ACL rule list docs/deployment.md gives for a
// relock user: the commands relock sends and its scripts run, its
// channels, and every key (lock names are the application's; see the doc).
var leastPrivilege = strings.Fields(`resetkeys ~* resetchannels &redisson_* &relock_*
-@all +hello +auth +ping +info +eval +evalsha
+publish +subscribe +unsubscribe +spublish +ssubscribe +sunsubscribe
+get +set +del +exists +type +pttl +pexpire +time +incr +incrby +decr +decrby
+hget +hset +hsetnx +hdel +hexists +hincrby +hkeys +hlen +hgetall +pubsub|numsub +pubsub|shardnumsub
+zadd +zrem +zscore +zrange +zrangebyscore +zremrangebyscore +zincrby +zcount
+lpop +rpush +lrem +lindex +lrange +scan +wait`)

// aclClient makes a relock client that connects as a new ACL user with
// the given rules, logging to logs.
func aclClient(t *testing.T, e env, user string, logs *syncBuffer, rules ...string) (*reentrant.Client, error) {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw"}, rules...)
	require.NoError(t, e.do(t, args...).Error())
	rdb := e.server.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = user, "pw" })
	c, err := reentrant.New(rdb, reentrant.Options{
		RepollInterval: 50 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// exercise runs, on c, every lock kind and synchronizer with a waiter on c
// woken by a release from another client (admin rights), and back.
func exercise(t *testing.T, c, other *reentrant.Client) {
	t.Helper()
	for kind, pair := range map[string][2]*reentrant.Lock{
		"plain":  {c.Lock("acl"), other.Lock("acl")},
		"fair":   {c.FairLock("acl:fair"), other.FairLock("acl:fair")},
		"fenced": {c.FencedLock("acl:fenced"), other.FencedLock("acl:fenced")},
		"write":  {c.ReadWriteLock("acl:rw").WriteLock(), other.ReadWriteLock("acl:rw").WriteLock()},
		"read":   {c.ReadWriteLock("acl:rw2").ReadLock(), other.ReadWriteLock("acl:rw2").WriteLock()},
	} {
		handOver(t, kind+" to another client", pair[0], pair[1])
		handOver(t, kind+" from another client", pair[1], pair[0])
	}
	sem := c.Semaphore("acl:sem")
	_, err := sem.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	require.NoError(t, other.Semaphore("acl:sem").Acquire(bg(), 1))
	woken := make(chan error, 1)
	go func() { woken <- sem.Acquire(bg(), 1, reentrant.WaitAtMost(20*time.Second)) }()
	require.NoError(t, other.Semaphore("acl:sem").Release(bg(), 1))
	require.NoError(t, <-woken, "semaphore waiter")
	require.NoError(t, sem.Release(bg(), 1))

	ps := c.PermitExpirableSemaphore("acl:permits")
	_, err = ps.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	p, err := ps.Acquire(bg())
	require.NoError(t, err)
	go func() {
		p2, err := other.PermitExpirableSemaphore("acl:permits").Acquire(bg(), reentrant.WaitAtMost(20*time.Second))
		if err == nil {
			err = p2.Release(bg())
		}
		woken <- err
	}()
	require.NoError(t, p.Release(bg()))
	require.NoError(t, <-woken, "permit waiter")

	latch := c.CountDownLatch("acl:latch")
	_, err = latch.TrySetCount(bg(), 1)
	require.NoError(t, err)
	go func() { woken <- latch.Await(bg(), reentrant.WaitAtMost(20*time.Second)) }()
	require.NoError(t, other.CountDownLatch("acl:latch").CountDown(bg()))
	require.NoError(t, <-woken, "latch waiter")

	rl := c.RateLimiter("acl:rate")
	require.NoError(t, rl.SetRate(bg(), reentrant.Rate{Permits: 1, Interval: 200 * time.Millisecond}))
	require.NoError(t, rl.Acquire(bg(), 1))
	require.NoError(t, rl.Acquire(bg(), 1, reentrant.WaitAtMost(20*time.Second)))

	info, err := c.Inspect(bg(), "acl:sem")
	require.NoError(t, err)
	assert.Equal(t, "acl:sem", info.Name)
}

// What each ACL user meets: the documented least-privilege user runs
// everything without a warning; a Redis 7 user with no channel rights
// runs everything too, releases reporting success, waiters polling, and
// one warning at New; a user refused scripts or TIME is refused at New,
// with the right named.
func TestACLUsers(t *testing.T) {
	e := onRedis(t)
	other := e.client(t)

	t.Run("least privilege", func(t *testing.T) {
		var logs syncBuffer
		c, err := aclClient(t, e, "relock", &logs, leastPrivilege...)
		require.NoError(t, err)
		exercise(t, c, other)
		assert.Empty(t, logs.String())
	})

	t.Run("no channel rights", func(t *testing.T) {
		var logs syncBuffer
		rules := append([]string{}, leastPrivilege...)
		for i, r := range rules {
			if strings.HasPrefix(r, "&") {
				rules[i] = "resetchannels"
			}
		}
		c, err := aclClient(t, e, "nochannels", &logs, rules...)
		require.NoError(t, err)
		exercise(t, c, other)
		assert.Equal(t, 1, strings.Count(logs.String(), "may not publish on relock's channels"), logs.String())
		assert.NotContains(t, logs.String(), "level=ERROR")
	})

	for right, rule := range map[string]string{"EVALSHA": "-evalsha", "EVAL": "-eval", "TIME": "-time"} {
		t.Run(fmt.Sprintf("no %s", right), func(t *testing.T) {
			var logs syncBuffer
			_, err := aclClient(t, e, "no"+strings.ToLower(right), &logs, append(append([]string{}, leastPrivilege...), rule)...)
			assert.ErrorIs(t, err, reentrant.ErrNoPermission)
			assert.ErrorContains(t, err, right)
		})
	}
}
