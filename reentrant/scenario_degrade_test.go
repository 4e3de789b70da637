package reentrant_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A client that may not SUBSCRIBE (an ACL refuses it) still acquires: its
// waiters poll within the usual bounds, and it warns once, not per wait.
func TestSubscribeRefusedFallsBackToPolling(t *testing.T) {
	e := onRedis(t)
	require.NoError(t, e.do(t, "ACL", "SETUSER", "nosub", "on", ">pw", "~*", "&*", "+@all", "-subscribe", "-ssubscribe").Error())
	rdb := e.server.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "nosub", "pw" })
	var logs syncBuffer
	c, err := reentrant.New(rdb, reentrant.Options{
		RepollInterval: 20 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	defer c.Close()
	holder := e.client(t)

	for round := 0; round < 3; round++ {
		held, err := holder.Lock("polled").Lock(bg())
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			ctx, err := c.Lock("polled").Lock(bg())
			if err == nil {
				err = c.Lock("polled").Unlock(ctx)
			}
			got <- err
		}()
		eventually(t, "the waiter's failed subscription", func() bool {
			return strings.Contains(logs.String(), "may not subscribe")
		})
		require.NoError(t, holder.Lock("polled").Unlock(held))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("polling waiter never acquired")
		}
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "may not subscribe"), "warned once:\n%s", logs.String())
}

// Unlock during an outage: a hold the watchdog has already declared lost
// returns its cause at once, without waiting for Redis; a hold not yet
// lost is tried again only until its local deadline, after which the lock
// may have expired, and the error says it is lost and why. Before, both
// waited out the 10 s release window.
func TestUnlockDuringOutage(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{WatchdogTimeout: 1500 * time.Millisecond})
	lost, err := c.Lock("lost-first").Lock(bg())
	require.NoError(t, err)
	pending, err := c.Lock("unlocked-in-outage").Lock(bg())
	require.NoError(t, err)
	e.server.Kill()

	start := time.Now()
	err = c.Lock("unlocked-in-outage").Unlock(pending)
	took := time.Since(start)
	assert.ErrorIs(t, err, reentrant.ErrLockLost)
	assert.ErrorContains(t, err, "lease ran out before its release could be confirmed")
	var op *net.OpError
	assert.ErrorAs(t, err, &op, "wraps the connection error")
	assert.Less(t, took, 5*time.Second, "bounded by the hold's lease, not the 10 s window")

	recv(t, lost.Done())
	require.ErrorIs(t, context.Cause(lost), reentrant.ErrLockLost)
	start = time.Now()
	err = c.Lock("lost-first").Unlock(lost)
	took = time.Since(start)
	assert.ErrorIs(t, err, reentrant.ErrLockLost)
	assert.ErrorIs(t, err, reentrant.ErrUnconfirmed)
	assert.Less(t, took, 5*time.Second, "returned without trying Redis")
}

// Redis down while 100 waiters wait: the whole outage is one warning and
// one note for the client, the pub/sub connection's loss folded in: not a
// line per dial, per wait, or per connection. The warning counts the
// waits held up and names a few. The outage is held until the client has
// failed to dial Redis 20 times (its waits' attempts and its pub/sub
// connection's redials: events, not a length of time), then Redis comes
// back and the waiters take the lock in turn.
func TestOutageLogging(t *testing.T) {
	e := onRedis(t)
	var logs syncBuffer
	var refused atomic.Int64
	rdb := e.server.Client(func(o *rueidis.ClientOption) {
		o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				refused.Add(1)
			}
			return c, err
		}
	})
	c, err := reentrant.New(rdb, reentrant.Options{
		RepollInterval: 200 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	holder := e.client(t)
	_, err = holder.Lock("outage").Lock(bg())
	require.NoError(t, err)
	const waiters = 100
	done := make(chan error, waiters)
	wait := func(name string) {
		go func() {
			h, err := c.Lock(name).Lock(bg(), reentrant.WaitAtMost(time.Minute))
			if err == nil {
				err = c.Lock(name).Unlock(h)
			}
			done <- err
		}()
	}
	for i := 0; i < waiters; i++ {
		wait("outage")
	}
	redistest.Eventually(t, 10*time.Second, "the waiters to subscribe", func() bool {
		chans, err := e.do(t, "PUBSUB", "CHANNELS", "*").AsStrSlice()
		return err == nil && len(chans) > 0
	})
	count := func(s string) int { return strings.Count(logs.String(), s) }
	before := strings.Count(logs.String(), "\n")
	e.server.Kill()
	redistest.Eventually(t, 30*time.Second, "the client to say Redis cannot be reached", func() bool {
		return count("relock: Redis cannot be reached or cannot run scripts") == 1
	})
	redistest.Eventually(t, 30*time.Second, "20 refused dials", func() bool { return refused.Load() >= 20 })
	assert.Regexp(t, `waits=\d+ of="(lock \\"outage\\"|the pub/sub connection)`, logs.String(), "how many waits, and on what")
	assert.Zero(t, count("Redis answers again"))

	e.server.Restart()
	for i := 0; i < waiters; i++ {
		require.NoError(t, recv(t, done), "waiter %d after the outage", i)
	}
	redistest.Eventually(t, 10*time.Second, "the note that Redis answers again", func() bool {
		return count("relock: Redis answers again") == 1
	})
	// The next waiter needs the subscription again: it is back, and says
	// nothing of it.
	held, err := holder.Lock("outage").Lock(bg())
	require.NoError(t, err)
	wait("outage")
	redistest.Eventually(t, 10*time.Second, "the waiter to subscribe", func() bool {
		chans, err := e.do(t, "PUBSUB", "CHANNELS", "*").AsStrSlice()
		return err == nil && len(chans) > 0
	})
	require.NoError(t, holder.Lock("outage").Unlock(held))
	require.NoError(t, recv(t, done))
	assert.Equal(t, 2, strings.Count(logs.String(), "\n")-before, "the outage, told in one warning and one note:\n%s", logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=INFO"), logs.String())
	t.Log(logs.String())
}

// A blip, Redis gone for less than RepollInterval (10 s here; the client
// fails to dial it 3 times, then it is back), says nothing: an outage is
// told only once it has lasted that long. The waiter takes the lock after.
func TestBlipIsNotWarned(t *testing.T) {
	e := onRedis(t)
	var logs syncBuffer
	var refused atomic.Int64
	rdb := e.server.Client(func(o *rueidis.ClientOption) {
		o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				refused.Add(1)
			}
			return c, err
		}
	})
	const grace = 10 * time.Second
	c, err := reentrant.New(rdb, reentrant.Options{RepollInterval: grace, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	holder := e.client(t)
	held, err := holder.Lock("blip").Lock(bg(), reentrant.LeaseFor(time.Second))
	require.NoError(t, err)
	_ = held
	done := make(chan error, 1)
	go func() {
		h, err := c.Lock("blip").Lock(bg(), reentrant.WaitAtMost(time.Minute))
		if err == nil {
			err = c.Lock("blip").Unlock(h)
		}
		done <- err
	}()
	redistest.Eventually(t, 10*time.Second, "the waiter to subscribe", func() bool {
		chans, err := e.do(t, "PUBSUB", "CHANNELS", "*").AsStrSlice()
		return err == nil && len(chans) > 0
	})
	e.server.Kill()
	began := time.Now()
	redistest.Eventually(t, grace, "3 refused dials", func() bool { return refused.Load() >= 3 })
	e.server.Restart()
	blip := time.Since(began)
	require.NoError(t, recv(t, done))
	if blip >= grace {
		t.Skipf("the blip lasted %v, past the grace of %v: a warning would be right", blip, grace)
	}
	// (Other lines may come of it: a release's unlock latch whose
	// deletion met the broken connection is logged on its own.)
	assert.NotContains(t, logs.String(), "Redis cannot be reached", "a %v blip is not warned of", blip.Round(time.Millisecond))
	assert.NotContains(t, logs.String(), "Redis answers again", "nor is its end")
}
