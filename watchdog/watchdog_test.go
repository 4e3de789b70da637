package watchdog_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/watchdog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRedis answers renewals: a key is renewed while it is in held.
type fakeRedis struct {
	mu      sync.Mutex
	held    map[string]bool
	fail    error // every call fails with it while set
	hang    bool  // calls block until their ctx ends
	calls   int   // renew function calls (rounds)
	scripts int   // batches, i.e. script calls
	sizes   []int
}

func (f *fakeRedis) renew(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
	f.mu.Lock()
	f.calls++
	f.scripts += len(batches)
	fail, hang := f.fail, f.hang
	renewed := make([][]bool, len(batches))
	errs := make([]error, len(batches))
	for i, b := range batches {
		f.sizes = append(f.sizes, len(b))
		group := b[0].Group
		renewed[i] = make([]bool, len(b))
		for j, l := range b {
			if l.Group != group {
				panic("batch mixes groups")
			}
			renewed[i][j] = f.held[l.Key]
			errs[i] = fail
		}
	}
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		for i := range errs {
			errs[i] = ctx.Err()
		}
	}
	return renewed, errs
}

func (f *fakeRedis) set(fn func(f *fakeRedis)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

type lossLog struct {
	mu  sync.Mutex
	at  map[string]time.Time
	why map[string]error
}

func newLossLog() *lossLog {
	return &lossLog{at: map[string]time.Time{}, why: map[string]error{}}
}

func (g *lossLog) onLost(key string) func(error) {
	return func(reason error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if _, twice := g.at[key]; twice {
			panic("lost reported twice for " + key)
		}
		g.at[key], g.why[key] = time.Now(), reason
	}
}

func (g *lossLog) get(key string) (time.Time, error, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.at[key]
	return at, g.why[key], ok
}

const timeout = 30 * time.Second

// Ten minutes of holding: every lease stays, and each round makes
// ceil(leases/batch) script calls, in one renew call.
func TestLongHoldBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{held: map[string]bool{}}
		w := watchdog.New(watchdog.Config{Timeout: timeout, BatchSize: 100, Renew: f.renew})
		defer w.Close()
		losses := newLossLog()
		const n = 250
		for i := 0; i < n; i++ {
			key := string(rune('a'+i%26)) + time.Duration(i).String()
			f.held[key] = true
			w.Add(key, "o", 0, true, watchdog.Deadline(time.Now(), timeout), losses.onLost(key))
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		assert.Equal(t, n, w.Len(), "every lease survives")
		assert.Empty(t, losses.at)
		rounds := int(10 * time.Minute / (timeout / 3))
		f.mu.Lock()
		defer f.mu.Unlock()
		assert.Equal(t, rounds, f.calls, "one renew call per period")
		assert.Equal(t, rounds*3, f.scripts, "ceil(250/100) = 3 script calls per period")
	})
}

// Batches never mix groups (cluster slots).
func TestBatchesByGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{held: map[string]bool{}}
		w := watchdog.New(watchdog.Config{Timeout: timeout, BatchSize: 2, Renew: f.renew})
		defer w.Close()
		for i := 0; i < 5; i++ {
			key := time.Duration(i).String()
			f.held[key] = true
			w.Add(key, "o", uint32(i%2), true, watchdog.Deadline(time.Now(), timeout), func(error) {})
		}
		time.Sleep(timeout / 3)
		synctest.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		assert.Equal(t, 3+0, f.scripts, "group 0: 3 leases -> 2 batches; group 1: 2 leases -> 1 batch")
		assert.ElementsMatch(t, []int{2, 1, 2}, f.sizes)
	})
}

// A hold reported gone is lost at the round that finds it, and leaves.
func TestGoneIsLostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{held: map[string]bool{"k": true}}
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: f.renew})
		defer w.Close()
		losses := newLossLog()
		start := time.Now()
		w.Add("k", "o", 0, true, watchdog.Deadline(start, timeout), losses.onLost("k"))
		f.set(func(f *fakeRedis) { delete(f.held, "k") })
		time.Sleep(timeout)
		synctest.Wait()
		at, why, ok := losses.get("k")
		require.True(t, ok)
		assert.ErrorIs(t, why, watchdog.ErrNotRenewed)
		assert.Equal(t, timeout/3, at.Sub(start), "found at the first round")
		assert.Zero(t, w.Len())
	})
}

// With Redis failing, renewal is retried with backoff, and the lease is lost
// at its local deadline: before the key could expire on the server.
func TestUnreachableLostAtDeadline(t *testing.T) {
	for name, broken := range map[string]func(f *fakeRedis){
		"errors": func(f *fakeRedis) { f.fail = errors.New("connection refused") },
		"hangs":  func(f *fakeRedis) { f.hang = true },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeRedis{held: map[string]bool{"k": true}}
				w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: f.renew})
				defer w.Close()
				losses := newLossLog()
				start := time.Now()
				w.Add("k", "o", 0, true, watchdog.Deadline(start, timeout), losses.onLost("k"))
				time.Sleep(timeout / 3) // first round renews: confirmed at start+10s
				synctest.Wait()
				confirmed := start.Add(timeout / 3)
				f.set(broken)
				time.Sleep(timeout)
				synctest.Wait()
				at, why, ok := losses.get("k")
				require.True(t, ok)
				assert.ErrorIs(t, why, watchdog.ErrUnconfirmed)
				assert.Equal(t, watchdog.Deadline(confirmed, timeout), at, "lost exactly at the local deadline")
				assert.True(t, at.Before(confirmed.Add(timeout)), "before the server-side TTL ends")
				f.mu.Lock()
				assert.GreaterOrEqual(t, f.calls, 3, "retried after the first failure")
				f.mu.Unlock()

				// Redis comes back: nothing brings the lost lease back.
				f.set(func(f *fakeRedis) { f.fail, f.hang = nil, false })
				time.Sleep(timeout)
				synctest.Wait()
				assert.Zero(t, w.Len())
			})
		})
	}
}

// An explicit lease is not renewed, and ends at its deadline.
func TestExplicitLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{held: map[string]bool{"k": true}}
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: f.renew})
		defer w.Close()
		losses := newLossLog()
		start := time.Now()
		w.Add("k", "o", 0, false, watchdog.Deadline(start, 2*time.Second), losses.onLost("k"))
		time.Sleep(time.Minute)
		synctest.Wait()
		at, why, ok := losses.get("k")
		require.True(t, ok)
		assert.ErrorIs(t, why, watchdog.ErrLeaseEnded)
		assert.Equal(t, 1800*time.Millisecond, at.Sub(start))
		f.mu.Lock()
		assert.Zero(t, f.scripts, "never renewed")
		f.mu.Unlock()
	})
}

// Removed leases are neither renewed nor reported; Close waits for a round
// in flight and drops everything silently.
func TestRemoveAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{held: map[string]bool{"a": true, "b": true}, hang: true}
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: f.renew})
		losses := newLossLog()
		a := w.Add("a", "o", 0, true, watchdog.Deadline(time.Now(), timeout), losses.onLost("a"))
		w.Add("b", "o", 0, true, watchdog.Deadline(time.Now(), timeout), losses.onLost("b"))
		assert.True(t, w.Remove(a))
		assert.False(t, w.Remove(a))
		assert.False(t, w.Update(a, true, time.Now().Add(time.Hour)))
		time.Sleep(timeout/3 + time.Second) // a round is in flight, hanging
		synctest.Wait()
		w.Close()
		w.Close()
		assert.Empty(t, losses.at)
		assert.Nil(t, w.Add("c", "o", 0, true, time.Now().Add(time.Hour), func(error) {}))
	})
}

// A lease whose renewal stops while a round is in flight: the renewal may
// land after the command that set the lease, so the deadline becomes the
// earlier of the two.
func TestRenewalInFlightWhenRenewalStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		renew := func(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
			<-release
			return [][]bool{{true}}, []error{nil}
		}
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: renew})
		defer w.Close()
		losses := newLossLog()
		l := w.Add("k", "o", 0, true, watchdog.Deadline(time.Now(), timeout), losses.onLost("k"))
		time.Sleep(timeout / 3) // the round is sent, and waits
		synctest.Wait()
		sent := time.Now()
		w.Update(l, false, watchdog.Deadline(time.Now(), time.Hour)) // an hour-long lease takes over
		close(release)
		time.Sleep(time.Hour)
		synctest.Wait()
		at, why, ok := losses.get("k")
		require.True(t, ok)
		assert.ErrorIs(t, why, watchdog.ErrLeaseEnded)
		assert.Equal(t, watchdog.Deadline(sent, timeout), at, "the late renewal's 30s TTL bounds it")
	})
}

// A failed round is retried soon, with backoff, not a period later: a hold
// whose renewals fail from T/3 until 0.78T, then work again, survives. A
// watchdog that waited a full period after a failure would send its next
// round at 2T/3, fail, then 3T/3: past the local deadline, 0.9T.
func TestQuickRetryAfterFailedRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		down := func() bool {
			since := time.Since(start)
			return since >= timeout/3 && since < timeout*78/100
		}
		var mu sync.Mutex
		var sent []time.Duration
		renew := func(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
			mu.Lock()
			sent = append(sent, time.Since(start))
			mu.Unlock()
			return oneLease(!down())
		}
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: renew})
		defer w.Close()
		losses := newLossLog()
		w.Add("k", "o", 0, true, watchdog.Deadline(start, timeout), losses.onLost("k"))
		time.Sleep(2 * timeout)
		synctest.Wait()
		_, why, lost := losses.get("k")
		assert.False(t, lost, "lost: %v", why)
		assert.Equal(t, 1, w.Len())
		mu.Lock()
		defer mu.Unlock()
		t.Logf("rounds sent at %v", sent)
	})
}

// The local deadline counts from when a renewal was sent, not from when its
// reply came: the server may have set the TTL at any moment in between. A
// renewal sent at T/3 whose reply takes 5s, then an outage, loses the hold
// at T/3 + 0.9T; counting from the reply would believe in it 5s longer,
// after the key could have expired.
func TestDeadlineCountsFromSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		const late = 5 * time.Second
		var mu sync.Mutex
		calls := 0
		renew := func(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
			mu.Lock()
			calls++
			first := calls == 1
			mu.Unlock()
			if first {
				time.Sleep(late)
			}
			return oneLease(first)
		}
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: renew})
		defer w.Close()
		losses := newLossLog()
		w.Add("k", "o", 0, true, watchdog.Deadline(start, timeout), losses.onLost("k"))
		time.Sleep(2 * timeout)
		synctest.Wait()
		at, why, lost := losses.get("k")
		require.True(t, lost)
		assert.ErrorIs(t, why, watchdog.ErrUnconfirmed)
		sent := start.Add(timeout / 3)
		assert.Equal(t, watchdog.Deadline(sent, timeout), at, "lost at the deadline counted from the send")
	})
}

// oneLease is a renewal reply for a round of one lease: renewed, or the
// call failed as when Redis cannot be reached.
func oneLease(reached bool) ([][]bool, []error) {
	if reached {
		return [][]bool{{true}}, []error{nil}
	}
	return [][]bool{{false}}, []error{errors.New("connection refused")}
}

// A renewed lease whose renewals stop being confirmed is told late once,
// LateAfter past the last confirmed one's send: 0.4 of the timeout before
// it is lost. A confirmed renewal ends the gap, and the next gap is told
// again. Neither steady renewals nor an explicit lease are ever late.
func TestLateBeforeLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeRedis{held: map[string]bool{"k": true, "e": true}}
		var mu sync.Mutex
		var told []time.Time // when Late was called
		var confirmed []time.Time
		w := watchdog.New(watchdog.Config{Timeout: timeout, Renew: f.renew, Late: func(l *watchdog.Lease, c time.Time) {
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, "k", l.Key)
			told = append(told, time.Now())
			confirmed = append(confirmed, c)
		}})
		defer w.Close()
		losses := newLossLog()
		start := time.Now()
		w.Add("k", "o", 0, true, watchdog.Deadline(start, timeout), losses.onLost("k"))
		w.Add("e", "o", 0, false, watchdog.Deadline(start, 2*timeout), losses.onLost("e"))
		time.Sleep(3 * timeout) // steady renewals: never late
		synctest.Wait()
		mu.Lock()
		assert.Empty(t, told)
		mu.Unlock()

		last := start.Add(3 * timeout) // a round was sent then, and confirmed
		f.set(func(f *fakeRedis) { f.fail = errors.New("connection refused") })
		time.Sleep(timeout / 2)
		synctest.Wait()
		f.set(func(f *fakeRedis) { f.fail = nil }) // the next round is confirmed
		time.Sleep(2 * timeout)
		synctest.Wait()
		mu.Lock()
		require.Len(t, told, 1, "one gap, told once")
		assert.Equal(t, last.Add(watchdog.LateAfter(timeout)), told[0])
		assert.Equal(t, last, confirmed[0])
		mu.Unlock()

		f.set(func(f *fakeRedis) { f.hang = true })
		time.Sleep(timeout)
		synctest.Wait()
		at, why, ok := losses.get("k")
		require.True(t, ok)
		require.ErrorIs(t, why, watchdog.ErrUnconfirmed)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, told, 2, "a second gap is told again")
		assert.True(t, confirmed[1].After(told[0]), "counted from a renewal after the first gap")
		assert.Equal(t, confirmed[1].Add(watchdog.LateAfter(timeout)), told[1])
		assert.Equal(t, watchdog.Deadline(confirmed[1], timeout), at)
		assert.GreaterOrEqual(t, at.Sub(told[1]), timeout/3, "told at least a third of the timeout before the loss")
		f.set(func(f *fakeRedis) { f.hang = false })
	})
}
