package pubsub_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/pubsub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSubscriber(t *testing.T) (*miniredis.Miniredis, *pubsub.Subscriber) {
	m, rdb := redistest.Miniredis(t)
	s := pubsub.New(rdb, pubsub.Classic, nil, nil)
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
		w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes)
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
	require.Eventually(t, func() bool { return m.PubSubNumSub("ch")["ch"] == 0 && s.Channels() == 0 }, 5*time.Second, time.Millisecond)
}

// A wake that its waiter leaves without using goes to the next waiter.
func TestUnusedWakePassesOn(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	a, err := s.Subscribe(ctx, "ch", pubsub.LockWakes)
	require.NoError(t, err)
	b, err := s.Subscribe(ctx, "ch", pubsub.LockWakes)
	require.NoError(t, err)
	c, err := s.Subscribe(ctx, "ch", pubsub.LockWakes)
	require.NoError(t, err)

	m.Publish("ch", "0")
	require.Eventually(t, func() bool { return len(a.C) == 1 }, 5*time.Second, time.Millisecond)
	a.Leave() // the wake sits unread in a.C
	assert.True(t, woken(b))
	b.PassOn() // read, but not acted on
	b.Leave()
	assert.True(t, woken(c))
	c.Leave()
}

// Channels come and go with their waiters; subscribing again after the
// last waiter left works, as does a waiter whose ctx ends while it
// subscribes.
func TestSubscriptionLifecycle(t *testing.T) {
	m, s := newSubscriber(t)
	ctx := context.Background()
	for round := 0; round < 20; round++ {
		w, err := s.Subscribe(ctx, "ch", pubsub.LockWakes)
		require.NoError(t, err)
		m.Publish("ch", "0")
		require.True(t, woken(w), "round %d", round)
		w.Leave()
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := s.Subscribe(cancelled, "other", pubsub.LockWakes)
	assert.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return s.Channels() == 0 }, 5*time.Second, time.Millisecond)

	s.Close()
	_, err = s.Subscribe(ctx, "ch", pubsub.LockWakes)
	assert.ErrorIs(t, err, pubsub.ErrClosed)
}
