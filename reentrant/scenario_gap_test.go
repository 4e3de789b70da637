package reentrant

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// gapClients returns a holder and a waiter on s, the waiter re-polling
// only every minute; both close with the test.
func gapClients(t *testing.T, s *redistest.Server) (holder, waiter *Client) {
	holder, err := New(s.Client(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	waiter, err = New(s.Client(), Options{RepollInterval: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { waiter.Close() })
	return holder, waiter
}

// Redisson #5761: locks missed unlock messages and waited out a timeout before
// the next attempt, or hung. The lock is released between a waiter's failed
// attempt and its subscription, so the release's message reaches nobody. The
// waiter still acquires at once, from the attempt it makes after subscribing,
// not after the holder's TTL or the re-poll interval (both a minute here).
func TestReleaseInTheGap(t *testing.T) {
	s := redistest.Start(t)
	holder, waiter := gapClients(t, s)

	held, err := holder.Lock("gap").Lock(context.Background(), LeaseFor(time.Minute))
	require.NoError(t, err)
	released := make(chan time.Time, 1)
	waiter.hookBeforeSubscribe = func() {
		require.NoError(t, holder.Lock("gap").Unlock(held))
		released <- time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := waiter.Lock("gap").Lock(ctx)
	require.NoError(t, err, "the waiter was left waiting")
	t.Logf("acquired %v after the release in the gap", time.Since(recv(t, released)))
	require.NoError(t, waiter.Lock("gap").Unlock(got))
}

// A fair lock released between its waiter's attempt and its subscription
// is handed to the waiter all the same (the release's message reaches
// nobody): the waiter's attempt after subscribing takes the grant, at once,
// not after the holder's TTL or the re-poll interval (a minute here).
func TestFairGrantInTheGap(t *testing.T) {
	s := redistest.Start(t)
	holder, waiter := gapClients(t, s)

	held, err := holder.FairLock("gap").Lock(context.Background(), LeaseFor(time.Minute))
	require.NoError(t, err)
	waiter.hookBeforeSubscribe = func() {
		require.NoError(t, holder.FairLock("gap").Unlock(held))
		fields, err := s.Do("HKEYS", "gap").AsStrSlice()
		require.NoError(t, err)
		assert.Len(t, fields, 1, "the release gave the lock to the waiter")
		grant, err := s.Do("HGET", "relock_grants:{gap}", fields[0]).ToString()
		require.NoError(t, err)
		assert.Equal(t, "0", grant, "the grant is not taken yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := waiter.FairLock("gap").Lock(ctx)
	require.NoError(t, err, "the waiter was left waiting")
	n, err := s.Do("HLEN", "relock_grants:{gap}").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the grant is taken")
	require.NoError(t, waiter.FairLock("gap").Unlock(got))
}

// A waiter whose subscription the server has not confirmed within the
// re-poll interval (its link dark, here the server paused) polls, but
// keeps the subscription: the confirmation wakes it for an attempt at once,
// since the release it was waiting for may have gone unheard. Given up, the
// subscription cost a whole re-poll after the link came back; at the head of
// a fair queue, everyone queued behind waited that long too. Here the
// release comes before the subscription (its message reaches nobody), and
// the server is paused until the waiter has given up waiting for the
// confirmation: the attempt that takes the lock must follow a wake-up, not
// the re-poll (two seconds).
func TestUnconfirmedSubscriptionWakesWhenConfirmed(t *testing.T) {
	s := redistest.Start(t)
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "lock", true: "fair"}[fair], func(t *testing.T) {
			holder, err := New(s.Client(), Options{})
			require.NoError(t, err)
			defer holder.Close()
			gaveUp := make(chan struct{}, 1)
			var woken atomic.Int32
			waiter, err := New(s.Client(), Options{
				RepollInterval: 2 * time.Second,
				Logger:         slog.New(signal{"relock: a subscription to a release channel is not confirmed yet", gaveUp}),
				Hooks:          Hooks{Woken: func(context.Context, Kind, string) { woken.Add(1) }},
			})
			require.NoError(t, err)
			defer waiter.Close()
			lock := func(c *Client) *Lock {
				if fair {
					return c.FairLock("unconfirmed")
				}
				return c.Lock("unconfirmed")
			}

			held, err := lock(holder).Lock(context.Background(), LeaseFor(time.Minute))
			require.NoError(t, err)
			var once sync.Once
			paused := false
			defer func() {
				if paused {
					s.Resume()
				}
			}()
			waiter.hookBeforeSubscribe = func() {
				once.Do(func() {
					assert.NoError(t, lock(holder).Unlock(held))
					s.Pause()
					paused = true
				})
			}
			type result struct {
				held context.Context
				err  error
			}
			got := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				held, err := lock(waiter).Lock(ctx)
				got <- result{held, err}
			}()
			recv(t, gaveUp)
			s.Resume()
			paused = false
			r := recv(t, got)
			require.NoError(t, r.err)
			assert.Equal(t, int32(1), woken.Load(), "taken after the confirmation's wake-up, not the re-poll")
			require.NoError(t, lock(waiter).Unlock(r.held))
		})
	}
}

// signal is a slog handler that signals on c when a message starting with
// prefix is logged.
type signal struct {
	prefix string
	c      chan<- struct{}
}

func (s signal) Enabled(context.Context, slog.Level) bool { return true }
func (s signal) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, s.prefix) {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
	return nil
}
func (s signal) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s signal) WithGroup(string) slog.Handler      { return s }

// Several waiters of one client fail, and the lock is released before
// their shared subscription is made: the release's message reaches nobody,
// so it tells no client. One of them looks again once subscribed (see
// waiting.recheck) and wins. If the others were on the channel by then,
// its win keeps the client in the waiters' set; if not, it takes the
// client out, and each of them that subscribes after that looks again too
// (see waitstate.Drops). Either way every one is woken in turn by the release
// before it, not by the re-poll (a minute here).
func TestReleaseInTheGapManyWaiters(t *testing.T) {
	s := redistest.Start(t)
	holder, waiter := gapClients(t, s)

	held, err := holder.Lock("gap").Lock(context.Background(), LeaseFor(time.Minute))
	require.NoError(t, err)
	const n = 3
	var arrived sync.WaitGroup
	arrived.Add(n)
	var once sync.Once
	waiter.hookBeforeSubscribe = func() {
		// Every waiter has failed, registered and is about to subscribe:
		// the release now reaches none of them.
		arrived.Done()
		arrived.Wait()
		once.Do(func() { require.NoError(t, holder.Lock("gap").Unlock(held)) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := waiter.Lock("gap").Lock(ctx)
			if assert.NoError(t, err, "a waiter was left waiting") {
				assert.NoError(t, waiter.Lock("gap").Unlock(got))
			}
		}()
	}
	waitAll(t, &wg)
}
