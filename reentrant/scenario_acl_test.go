package reentrant_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// leastPrivilege is the ACL rule list docs/deployment.md gives for a
// relock user of locks and synchronizers: the commands relock sends and
// its scripts run, its channels, and every key (lock names are the
// application's; see the doc).
func leastPrivilege(t *testing.T) []string { return redistest.DocumentedACL(t, "locks") }

// aclClient makes a relock client that connects as a new ACL user with
// the given rules, logging to logs.
func aclClient(t *testing.T, e env, user string, logs *syncBuffer, rules ...string) (*reentrant.Client, error) {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw"}, rules...)
	require.NoError(t, e.do(t, args...).Error())
	// The guide's client, on the test's server as the test's user.
	rdb := e.server.Client(func(o *rueidis.ClientOption) {
		addr, tls := o.InitAddress, o.TLSConfig
		*o = readmeOption()
		o.InitAddress, o.TLSConfig, o.Username, o.Password = addr, tls, user, "pw"
	})
	c, err := reentrant.New(rdb, reentrant.Options{
		RepollInterval: 50 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// What each ACL user meets: the documented least-privilege user runs
// everything without a warning; a Redis 7 user with no channel rights
// runs everything too, releases reporting success, waiters polling, and
// one warning at New; a user refused PUBSUB NUMSUB takes and hands on
// locks, its releases publishing before they count, with one line at New;
// a user refused scripts or TIME is refused at New, with the right named.
func TestACLUsers(t *testing.T) {
	e := onRedis(t)
	other := e.client(t)

	t.Run("least privilege", func(t *testing.T) {
		var logs syncBuffer
		c, err := aclClient(t, e, "relock", &logs, leastPrivilege(t)...)
		require.NoError(t, err)
		exercise(t, c, other, "acl:")
		// Nothing refused. (A subscription a loaded machine confirms late
		// is logged too, and is not the user's doing.)
		for _, refusal := range []string{"may not", "NOPERM", "permission", "level=ERROR"} {
			assert.NotContains(t, logs.String(), refusal)
		}
	})

	t.Run("no channel rights", func(t *testing.T) {
		var logs syncBuffer
		rules := append([]string{}, leastPrivilege(t)...)
		for i, r := range rules {
			if strings.HasPrefix(r, "&") {
				rules[i] = "resetchannels"
			}
		}
		c, err := aclClient(t, e, "nochannels", &logs, rules...)
		require.NoError(t, err)
		exercise(t, c, other, "acl:")
		assert.Equal(t, 1, strings.Count(logs.String(), "may not publish on relock's channels"), logs.String())
		assert.NotContains(t, logs.String(), "level=ERROR")
	})

	t.Run("no PUBSUB NUMSUB", func(t *testing.T) {
		var logs syncBuffer
		c, err := aclClient(t, e, "nonumsub", &logs, append(append([]string{}, leastPrivilege(t)...), "-pubsub|numsub", "-pubsub|shardnumsub")...)
		require.NoError(t, err)
		// Not exercise: Inspect counts listeners too, and says it may not.
		handOnWhileWaiting(t, e, c, other, "acl:numsub")
		assert.Equal(t, 1, strings.Count(logs.String(), "may not run PUBSUB NUMSUB"), logs.String())
		assert.NotContains(t, logs.String(), "level=ERROR")
	})

	for right, rule := range map[string]string{"EVALSHA": "-evalsha", "EVAL": "-eval", "TIME": "-time"} {
		t.Run(fmt.Sprintf("no %s", right), func(t *testing.T) {
			var logs syncBuffer
			_, err := aclClient(t, e, "no"+strings.ToLower(right), &logs, append(append([]string{}, leastPrivilege(t)...), rule)...)
			assert.ErrorIs(t, err, reentrant.ErrNoPermission)
			assert.ErrorContains(t, err, right)
		})
	}
}

// handOnWhileWaiting has c release plain lock name while another of its
// waiters waits, and other's too: the release of a client that listens on
// the lock's channel, which (with the right) counts the listeners there
// before it publishes (scripts.Release.Count). c's two waiters take the
// lock in turn, other's after them.
func handOnWhileWaiting(t *testing.T, e env, c, other *reentrant.Client, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()
	held, err := other.Lock(name).Lock(ctx)
	require.NoError(t, err)
	taken := make(chan context.Context, 2)
	errs := make(chan error, 3)
	for range 2 {
		go func() {
			h, err := c.Lock(name).Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			taken <- h
		}()
	}
	eventually(t, "c waiting", func() bool {
		return e.do(t, "ZSCORE", "relock_waiters:{"+name+"}", c.ID()).Error() == nil
	})
	require.NoError(t, other.Lock(name).Unlock(held))
	first := recv(t, taken)
	go func() {
		h, err := other.Lock(name).Lock(ctx)
		if err == nil {
			err = other.Lock(name).Unlock(h)
		}
		errs <- err
	}()
	eventually(t, "other waiting, and both listening", func() bool {
		n, _ := e.do(t, "PUBSUB", "NUMSUB", "redisson_lock__channel:{"+name+"}").ToArray()
		listening, _ := n[1].AsInt64()
		return listening == 2 && e.do(t, "ZSCORE", "relock_waiters:{"+name+"}", other.ID()).Error() == nil
	})
	require.NoError(t, c.Lock(name).Unlock(first), "a release while c and other wait")
	require.NoError(t, c.Lock(name).Unlock(recv(t, taken)))
	require.NoError(t, recv(t, errs))
}
