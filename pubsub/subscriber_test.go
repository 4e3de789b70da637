package pubsub_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/pubsub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSubscriber(t *testing.T) (*miniredis.Miniredis, *pubsub.Subscriber) {
	m, rdb := redistest.Miniredis(t)
	s := pubsub.New(rdb, pubsub.Classic, nil, nil, 0, nil)
	t.Cleanup(s.Close)
	return m, s
}

func woken(w *pubsub.Waiter) bool {
	select {
	case <-w.C:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func notWoken(w *pubsub.Waiter) bool {
	select {
	case <-w.C:
		return false
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

// "0" wakes one waiter at a time, in arrival order; "1" wakes them all;
// anything else wakes nobody.
func TestWakeOrder(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	var ws []*pubsub.Waiter
	for i := 0; i < 4; i++ {
		w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
		require.NoError(t, err)
		ws = append(ws, w)
	}
	assert.Equal(t, 1, m.PubSubNumSub("ch")["ch"], "one subscription for four waiters")

	m.Publish("ch", "0")
	assert.True(t, woken(ws[0]), "first to arrive, first woken")
	assert.True(t, notWoken(ws[1]))
	m.Publish("ch", "0")
	assert.True(t, woken(ws[0]), "a woken waiter that stays keeps its place")
	ws[0].Leave()
	m.Publish("ch", "0")
	assert.True(t, woken(ws[1]))
	assert.True(t, notWoken(ws[2]))

	m.Publish("ch", "surprise")
	for _, w := range ws[1:] {
		assert.True(t, notWoken(w), "unknown payloads are ignored")
	}
	m.Publish("ch", "1")
	for _, w := range ws[1:] {
		assert.True(t, woken(w), "1 wakes everyone")
	}
	for _, w := range ws {
		w.Leave()
		w.Leave()
	}
	// The server drops the channel before the client reads its
	// confirmation: wait for both.
	redistest.Eventually(t, 5*time.Second, "ch unsubscribed on the server and here", func() bool { return m.PubSubNumSub("ch")["ch"] == 0 && s.Channels() == 0 })
}

// A wake that its waiter leaves without using goes to the next waiter.
func TestUnusedWakePassesOn(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	a, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)
	b, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)
	c, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)

	m.Publish("ch", "0")
	redistest.Eventually(t, 5*time.Second, "a woken", func() bool { return len(a.C) == 1 })
	a.Leave() // the wake sits unread in a.C
	assert.True(t, woken(b))
	b.PassOn() // read, but not acted on
	b.Leave()
	assert.True(t, woken(c))
	c.Leave()
}

// Channels come and go with their waiters; subscribing again after the
// last waiter left works; a ctx that has ended subscribes nothing.
func TestSubscriptionLifecycle(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
		require.NoError(t, err)
		m.Publish("ch", "0")
		require.True(t, woken(w), "round %d", round)
		w.Leave()
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Subscribe(cancelled, "other", pubsub.LockWakes, nil)
	assert.ErrorIs(t, err, context.Canceled)
	redistest.Eventually(t, 5*time.Second, "no channel left", func() bool { return s.Channels() == 0 })

	s.Close()
	_, err = s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	assert.ErrorIs(t, err, pubsub.ErrClosed)
}

// A waiter that arrives while its channel's UNSUBSCRIBE is unconfirmed, and
// then sees the connection drop, is confirmed by the resubscription on the
// next connection (it once waited for a confirmation that never came).
func TestReconnectWhileUnsubscribing(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var conns []net.Conn
	rdb := srv.Client(func(o *rueidis.ClientOption) {
		o.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
			return c, err
		}
	})
	s := pubsub.New(rdb, pubsub.Classic, nil, nil, 0, nil)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	first, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)
	srv.Pause() // nothing is confirmed from here on
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	first.Leave() // UNSUBSCRIBE sent, unconfirmed
	type result struct {
		w   *pubsub.Waiter
		err error
	}
	second := make(chan result, 1)
	go func() {
		w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
		second <- result{w, err}
	}()
	redistest.Eventually(t, 10*time.Second, "one waiter on ch", func() bool { return s.Waiting("ch") == 1 })

	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	srv.Resume()
	resumed = true

	r := recv(t, second)
	require.NoError(t, r.err, "the second waiter is confirmed on the new connection")
	srv.Do("PUBLISH", "ch", pubsub.WakeOne)
	assert.True(t, woken(r.w), "and hears the channel")
	r.w.Leave()
}

// A waiter whose ctx ends before the server confirms its subscription gets
// ErrUnconfirmed with its waiter, which the confirmation wakes (a message
// before it went unheard) and which hears the channel from then on. One
// that leaves at once drops the channel once the server answers.
func TestSubscribeUnconfirmed(t *testing.T) {
	srv := redistest.Start(t)
	s := pubsub.New(srv.Client(), pubsub.Classic, nil, nil, 0, nil)
	t.Cleanup(s.Close)
	warm, err := s.Subscribe(context.Background(), "warm", pubsub.LockWakes, nil)
	require.NoError(t, err) // the connection is up
	warm.Leave()
	redistest.Eventually(t, 10*time.Second, "no channel left", func() bool { return s.Channels() == 0 })

	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	subscribe := func(name string) *pubsub.Waiter {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		w, err := s.Subscribe(ctx, name, pubsub.LockWakes, nil)
		require.ErrorIs(t, err, pubsub.ErrUnconfirmed)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotNil(t, w)
		return w
	}
	kept := subscribe("ch")
	subscribe("gone").Leave()
	srv.Resume()
	resumed = true

	require.True(t, woken(kept), "the confirmation wakes the waiter")
	redistest.Eventually(t, 10*time.Second, "the channel left is dropped", func() bool { return s.Channels() == 1 })
	srv.Do("PUBLISH", "ch", pubsub.WakeOne)
	assert.True(t, woken(kept), "the waiter hears its channel")
	assert.False(t, kept.Failed())
	kept.Leave()
	redistest.Eventually(t, 10*time.Second, "no channel left", func() bool { return s.Channels() == 0 })
	n, err := srv.Do("PUBSUB", "NUMSUB", "ch", "gone").AsIntMap()
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"ch": 0, "gone": 0}, n, "the server dropped both")
}

// A subscription the server refuses to make again after a reconnect (here:
// the user lost the right to the channel, and Redis disconnected it) wakes
// its waiter and says so: Failed, and no wake is passed on.
func TestSubscriptionFailsAfterReconnect(t *testing.T) {
	srv := redistest.Start(t)
	require.NoError(t, srv.Do("ACL", "SETUSER", "waiter", "on", ">pw", "~*", "&*", "+@all").Error())
	rdb := srv.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "waiter", "pw" })
	unclaimed := make(chan struct{}, 1)
	s := pubsub.New(rdb, pubsub.Classic, nil, nil, 0, nil)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, func() { unclaimed <- struct{}{} })
	require.NoError(t, err)
	require.False(t, w.Failed())

	require.NoError(t, srv.Do("ACL", "SETUSER", "waiter", "resetchannels", "&other").Error())
	require.True(t, woken(w), "the failure wakes the waiter")
	assert.True(t, w.Failed())
	w.Leave()
	assert.Empty(t, unclaimed, "the failure's wake is not passed on")
	assert.Zero(t, s.Channels())
}

// A wake that finds every waiter woken already is theirs, not passed on: a
// waiter woken before will try, and passing the wake on would take its
// client out of a directed lock's waiters' set behind that waiter's back.
// Only a channel with no waiter, or a waiter leaving with a wake unused,
// passes it on.
func TestWakeForWokenWaitersStays(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	unclaimed := make(chan struct{}, 4)
	a, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, func() { unclaimed <- struct{}{} })
	require.NoError(t, err)

	probe, err := s.Subscribe(ctx, "probe", pubsub.LockWakes, nil)
	require.NoError(t, err)
	defer probe.Leave()

	m.Publish("ch", "0")
	redistest.Eventually(t, 5*time.Second, "a woken", func() bool { return len(a.C) == 1 })
	m.Publish("ch", "0") // a has not read the first
	m.Publish("probe", "0")
	require.True(t, woken(probe), "messages are handled in order: the second wake was too")
	a.Leave() // with the first wake unread: passed on, to nobody
	select {
	case <-unclaimed:
	case <-time.After(5 * time.Second):
		t.Fatal("the unused wake of the last waiter was not passed on")
	}
	assert.Empty(t, unclaimed, "the wakes that found a woken were not passed on")
}

// Of the waiters that subscribe a channel together, before it is
// confirmed, exactly one is told to look again at once (Recheck); a waiter
// that finds the channel live is not, nor one that joins it.
func TestRecheckOnePerSubscription(t *testing.T) {
	_, s := newSubscriber(t)
	ctx := context.Background()
	const n = 16
	rechecks := make(chan bool, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
			if !assert.NoError(t, err) {
				return
			}
			rechecks <- w.Recheck()
			t.Cleanup(w.Leave)
		}()
	}
	waitAll(t, &wg)
	close(rechecks)
	told := 0
	for r := range rechecks {
		if r {
			told++
		}
	}
	assert.Equal(t, 1, told, "one of the waiters that subscribed together")
	late, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)
	defer late.Leave()
	assert.False(t, late.Recheck(), "the channel was live")
	joined := s.Join("ch")
	require.NotNil(t, joined)
	defer joined.Leave()
	assert.False(t, joined.Recheck())
}

// A grant ("2:<n>") wakes the longest-waiting waiter and gives it the
// attempt number n, which TakeGiven returns once; a malformed one wakes
// nobody.
func TestGrant(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	a, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)
	defer a.Leave()
	b, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, nil)
	require.NoError(t, err)
	defer b.Leave()

	for _, bad := range []string{"2", "2:", "2:x", "2:-1", "3:1"} {
		m.Publish("ch", bad)
		assert.True(t, notWoken(a), bad)
	}
	assert.Zero(t, a.TakeGiven())
	m.Publish("ch", pubsub.Granted+":7")
	assert.True(t, woken(a))
	assert.True(t, notWoken(b))
	assert.EqualValues(t, 7, a.TakeGiven())
	assert.Zero(t, a.TakeGiven(), "once")
	assert.Zero(t, b.TakeGiven())
}

// ListensFor says whether a channel is subscribed, and bounds from below
// how long it stays subscribed: the linger while it has waiters, what is
// left of it once the last one left (a channel lingers only with an
// unclaimed handler), and 0 for a channel being unsubscribed, one never
// subscribed, and after Close.
func TestListensFor(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	s := pubsub.New(rdb, pubsub.Classic, nil, nil, time.Minute, nil)
	t.Cleanup(s.Close)
	ctx := context.Background()
	d, subscribed := s.ListensFor("ch")
	assert.Zero(t, d)
	assert.False(t, subscribed)

	w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes, func() {})
	require.NoError(t, err)
	d, subscribed = s.ListensFor("ch")
	assert.Equal(t, time.Minute, d, "with a waiter")
	assert.True(t, subscribed)
	w.Leave()
	left, subscribed := s.ListensFor("ch")
	assert.True(t, left > 0 && left <= time.Minute, "lingering: %v", left)
	assert.True(t, subscribed)

	w, err = s.Subscribe(ctx, "other", pubsub.LockWakes, nil)
	require.NoError(t, err)
	w.Leave() // no unclaimed handler: no linger
	d, _ = s.ListensFor("other")
	assert.Zero(t, d)

	s.Close()
	d, _ = s.ListensFor("ch")
	assert.Zero(t, d, "closed")
}
