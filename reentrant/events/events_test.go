package events_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/events"
)

// TestMain checks that no goroutine outlives a test, but rueidis's cluster
// client's: its map refreshes and delayed calls end on their own, after
// Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// notifying starts a redis-server that publishes every keyspace
// notification.
func notifying(t *testing.T) *redistest.Server {
	return redistest.Start(t, "--notify-keyspace-events", "KEA")
}

func client(t *testing.T, rdb rueidis.Client, wd time.Duration) *reentrant.Client {
	t.Helper()
	c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: wd})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// next returns the next event, failing the test after 10s without one.
func next(t *testing.T, ch <-chan events.Event) events.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "the watch ended")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
		return events.Event{}
	}
}

// expect reads the next event and checks its kind and holders' owners.
func expect(t *testing.T, ch <-chan events.Event, kind events.Kind, owners ...string) {
	t.Helper()
	ev := next(t, ch)
	var got []string
	for _, h := range ev.Holders {
		got = append(got, h.Owner)
	}
	assert.Equal(t, kind, ev.Kind, "event %+v", ev)
	assert.Equal(t, owners, got, "%s's holders", ev.Kind)
}

func ownerOf(t *testing.T, held context.Context) string {
	t.Helper()
	o, ok := reentrant.OwnerFrom(held)
	require.True(t, ok)
	return o.String()
}

// stallable dials through a gate: once stalled, what the client writes
// waits, as if its process had stopped (SIGSTOP) with its connections
// open, until the test ends.
func stallable(t *testing.T, s *redistest.Server) (rdb rueidis.Client, stall func()) {
	var gate atomic.Pointer[chan struct{}]
	rdb = s.Client(func(o *rueidis.ClientOption) {
		o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			return gatedConn{c, &gate}, err
		}
	})
	stopped := make(chan struct{})
	return rdb, func() {
		gate.Store(&stopped)
		t.Cleanup(func() { close(stopped) }) // before the client closes
	}
}

type gatedConn struct {
	net.Conn
	gate *atomic.Pointer[chan struct{}]
}

func (c gatedConn) Write(b []byte) (int, error) {
	if g := c.gate.Load(); g != nil {
		<-*g
	}
	return c.Conn.Write(b)
}

// One lock's life, watched by relock and by Redisson's object listeners
// (the peer's, as RedissonObject.addListener): a holder acquires (told
// once, however often it re-enters) and releases; a holder is force-unlocked by
// the Java peer; a holder whose process stalls expires. Redisson's
// listeners see the deletes and the expiry; relock's see each event, in
// order, with its holder.
func TestWatchTellsEachEventAsRedissonListeners(t *testing.T) {
	s := notifying(t)
	rdb := s.Client()
	c := client(t, rdb, 0)
	ctx := t.Context()
	ch, err := events.Watch(ctx, c, "job", events.Options{})
	require.NoError(t, err)
	java := redissontest.New(rdb)
	calls, err := java.AddObjectListeners(ctx, "job")
	require.NoError(t, err)
	lock := c.Lock("job")

	held, err := lock.Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
	again, err := lock.Lock(held)
	require.NoError(t, err)
	require.NoError(t, lock.Unlock(again))
	require.NoError(t, lock.Unlock(held))
	expect(t, ch, events.Released, ownerOf(t, held))

	held, err = lock.Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
	deleted, err := java.ForceUnlock(ctx, "job")
	require.NoError(t, err)
	require.True(t, deleted)
	expect(t, ch, events.Deleted, ownerOf(t, held))
	<-held.Done()

	rdb2, stall := stallable(t, s)
	paused := client(t, rdb2, time.Second)
	held, err = paused.Lock("job").Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
	stall()
	expect(t, ch, events.Expired, ownerOf(t, held))

	for _, want := range []string{"deleted", "deleted", "expired"} {
		select {
		case got := <-calls:
			assert.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("Redisson's listener was not called (%s)", want)
		}
	}
	select {
	case ev := <-ch:
		t.Errorf("an event more: %+v", ev)
	case got := <-calls:
		t.Errorf("a Redisson listener call more: %s", got)
	default:
	}
}

// With notifications off, Watch fails with ErrNotificationsOff naming the
// flags missing, and leaves the server's setting as it was; with
// EnableNotifications it adds them and watches.
func TestWatchNotificationsOff(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client()
	c := client(t, rdb, 0)
	ctx := t.Context()
	s.Do("CONFIG", "SET", "notify-keyspace-events", "Ex")

	_, err := events.Watch(ctx, c, "job", events.Options{})
	require.ErrorIs(t, err, events.ErrNotificationsOff)
	assert.ErrorContains(t, err, `"Kgh$"`)
	setting, err := s.Do("CONFIG", "GET", "notify-keyspace-events").AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, "xE", setting["notify-keyspace-events"], "left as it was")

	ch, err := events.Watch(ctx, c, "job", events.Options{EnableNotifications: true})
	require.NoError(t, err)
	setting, err = s.Do("CONFIG", "GET", "notify-keyspace-events").AsStrMap()
	require.NoError(t, err)
	for _, f := range "Kgxh$E" {
		assert.Contains(t, setting["notify-keyspace-events"], string(f))
	}
	held, err := c.Lock("job").Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
}

// A server that refuses CONFIG cannot be checked: Watch says so, and with
// Unchecked it watches.
func TestWatchConfigRefused(t *testing.T) {
	s := redistest.Start(t, "--notify-keyspace-events", "KEA", "--rename-command", "CONFIG", "")
	rdb := s.Client()
	c := client(t, rdb, 0)
	ctx := t.Context()
	_, err := events.Watch(ctx, c, "job", events.Options{})
	require.ErrorIs(t, err, events.ErrNotificationsUnknown)

	ch, err := events.Watch(ctx, c, "job", events.Options{Unchecked: true})
	require.NoError(t, err)
	held, err := c.Lock("job").Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
}

// A semaphore's and a latch's counts are told as they change; a latch
// that opens (its key deleted by the last count-down) is a count of 0, not
// a deletion.
func TestWatchCounts(t *testing.T) {
	s := notifying(t)
	rdb := s.Client()
	c := client(t, rdb, 0)
	ctx := t.Context()

	sem := c.Semaphore("permits")
	ok, err := sem.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok)
	ch, err := events.Watch(ctx, c, "permits", events.Options{})
	require.NoError(t, err)
	require.NoError(t, sem.Acquire(ctx, 1))
	ev := next(t, ch)
	assert.Equal(t, events.Changed, ev.Kind)
	assert.Equal(t, int64(1), ev.Count)

	latch := c.CountDownLatch("gate")
	ok, err = latch.TrySetCount(ctx, 1)
	require.NoError(t, err)
	require.True(t, ok)
	lch, err := events.Watch(ctx, c, "gate", events.Options{})
	require.NoError(t, err)
	require.NoError(t, latch.CountDown(ctx))
	ev = next(t, lch)
	assert.Equal(t, events.Changed, ev.Kind)
	assert.Equal(t, int64(0), ev.Count)
}

// On a cluster, the watch listens on the key's node: each of several
// names, on different nodes, is told its own events.
func TestWatchOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	rdb := cl.Client()
	c := client(t, rdb, 0)
	ctx := t.Context()
	for i := range 6 {
		name := fmt.Sprintf("job-%d", i)
		ch, err := events.Watch(ctx, c, name, events.Options{EnableNotifications: true})
		require.NoError(t, err, name)
		held, err := c.Lock(name).Lock(ctx)
		require.NoError(t, err)
		expect(t, ch, events.Acquired, ownerOf(t, held))
		require.NoError(t, c.Lock(name).Unlock(held))
		expect(t, ch, events.Released, ownerOf(t, held))
	}
}

// Watch refuses nil arguments with ErrInvalidArgument.
func TestWatchInvalid(t *testing.T) {
	_, err := events.Watch(context.Background(), nil, "job", events.Options{})
	assert.True(t, errors.Is(err, reentrant.ErrInvalidArgument))
}
