package reentrant_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(holderEnv); spec != "" {
		runHolder(spec)
		return
	}
	// rueidis's cluster client closes the connections a topology refresh
	// replaced 5s later, and schedules a lazy topology refresh after a
	// MOVED or a broken link (DelayDo: sleep, then refresh), each in a
	// goroutine of its own that Close does not wait for. They are
	// rueidis's, not relock's, and end by themselves.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// env is one Redis for a test: a real redis-server or a miniredis.
type env struct {
	server *redistest.Server    // nil on miniredis
	mini   *miniredis.Miniredis // nil on real Redis
	admin  rueidis.Client
}

func onRedis(t *testing.T) env {
	s := redistest.Start(t)
	return env{server: s, admin: s.Client()}
}

func onMiniredis(t *testing.T) env {
	m, c := redistest.Miniredis(t)
	return env{mini: m, admin: c}
}

// onBoth runs f on real Redis and on miniredis, for behaviour miniredis
// reproduces faithfully.
func onBoth(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("redis", func(t *testing.T) { f(t, onRedis(t)) })
	t.Run("miniredis", func(t *testing.T) { f(t, onMiniredis(t)) })
}

// rdb returns a new rueidis client, as a separate process would have.
func (e env) rdb(t *testing.T) rueidis.Client {
	if e.server != nil {
		return e.server.Client()
	}
	return redistest.MiniredisClient(t, e.mini, rueidis.ClientOption{})
}

// client returns a new relock client on its own connection.
func (e env) client(t *testing.T, opts ...reentrant.Options) *reentrant.Client {
	var o reentrant.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, err := reentrant.New(e.rdb(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (e env) do(t *testing.T, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.admin.Do(ctx, e.admin.B().Arbitrary(args...).Build())
}

func (e env) int(t *testing.T, args ...string) int64 {
	t.Helper()
	n, err := e.do(t, args...).AsInt64()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return n
}

// subscribe listens on channel through a dedicated admin connection and
// returns the messages it receives; it returns once the subscription is live.
func (e env) subscribe(t *testing.T, channel string) <-chan string {
	t.Helper()
	d, release := e.rdb(t).Dedicate()
	t.Cleanup(release)
	msgs := make(chan string, 16)
	live := make(chan struct{}, 1)
	d.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage:      func(m rueidis.PubSubMessage) { msgs <- m.Message },
		OnSubscription: func(rueidis.PubSubSubscription) { live <- struct{}{} },
	})
	if err := d.Do(context.Background(), d.B().Subscribe().Channel(channel).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	recv(t, live)
	return msgs
}

func receive(t *testing.T, msgs <-chan string) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
		return ""
	}
}

// eventually waits, up to a generous bound, for cond to hold.
// wakeChannel is the channel on which c's waiters on the plain or fenced
// lock name hear directed wakes (a lock whose holder is a relock client).
func wakeChannel(c *reentrant.Client, name string) string {
	return "relock_wake:{" + name + "}:" + c.ID()
}

// eventually waits up to 20s for cond (see redistest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, 20*time.Second, what, cond)
}

var ownerField = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]+$`)

// bg is the context of steps that must not be cut short.
func bg() context.Context { return context.Background() }

// recv is a test's wait for a value, bounded (see redistest.Within): a
// failure names its line in seconds. (waitAll bounds a wait for
// goroutines.)
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	return redistest.Recv(t, ch)
}

// contend runs one goroutine per lock handle (handles on one lock, from any
// clients), each taking it rounds times and holding it 100µs. Each sets an
// in-section flag on entry; finding it set means two holders at once. It
// returns the overlaps seen and the acquisitions made.
func contend(t *testing.T, locks []*reentrant.Lock, rounds int) (overlaps, entries int64) {
	var inside atomic.Bool
	var o, n atomic.Int64
	var wg sync.WaitGroup
	for _, l := range locks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				held, err := l.Lock(bg())
				if !assert.NoError(t, err) {
					return
				}
				if !inside.CompareAndSwap(false, true) {
					o.Add(1)
				}
				n.Add(1)
				time.Sleep(100 * time.Microsecond)
				inside.Store(false)
				assert.NoError(t, l.Unlock(held))
			}
		}()
	}
	waitAll(t, &wg, redistest.Within, func() {})
	return o.Load(), n.Load()
}

// handoffs records when each of a test's waiters took a lock, to bound the
// gaps between turns: a wake-up that goes missing shows as a gap as long as
// the fallback (a TTL, a re-poll) instead of a round trip.
type handoffs struct {
	mu    sync.Mutex
	times []time.Time
}

func (h *handoffs) took() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.times = append(h.times, time.Now())
}

// longest returns the longest gap between from and the first turn, or
// between two turns in a row.
func (h *handoffs) longest(from time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	slices.SortFunc(h.times, time.Time.Compare)
	var gap time.Duration
	for _, at := range h.times {
		gap = max(gap, at.Sub(from))
		from = at
	}
	return gap
}

// waitAll waits for wg up to limit. Past it, it cancels the waiters' ctx so
// that none outlives the test, and fails.
func waitAll(t *testing.T, wg *sync.WaitGroup, limit time.Duration, cancel context.CancelFunc) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		cancel()
		<-done
		t.Fatalf("waiters not through within %v", limit)
	}
}
