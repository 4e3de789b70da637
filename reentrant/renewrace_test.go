package reentrant_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// jittery delays every call it passes on by up to max before it is sent
// and again after its reply came, so that the watchdog's rounds, acquires
// and releases reach Redis, and their replies the client, in every order.
type jittery struct {
	rueidis.Client
	max time.Duration
}

func (j jittery) nap() { time.Sleep(rand.N(j.max)) }

func (j jittery) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	j.nap()
	defer j.nap()
	return j.Client.Do(ctx, cmd)
}

func (j jittery) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	j.nap()
	defer j.nap()
	return j.Client.DoMulti(ctx, cmds...)
}

// Redisson #7272: a watchdog renewal must not outlive the hold it keeps:
// neither one the watchdog sent before Unlock and Redis ran after it, nor
// one for an acquire whose reply came after its caller gave up (Redisson
// then arms the renewal after the unlock, for good). With every call
// delayed at random (late acquire replies, renewal rounds in flight) and a
// round every 20ms, 300 pairs on one name, every other one a Lock whose
// ctx ends at a random moment of its attempt, leave no key once Unlock
// returns nil; once the abandoned attempts are undone the watchdog renews
// nothing but the hold kept all along, and no hold was reported lost. The
// test counts the Unlocks that overlapped a round, and fails if none did
// (it would then have proved nothing).
func TestNoRenewalOutlivesUnlock(t *testing.T) {
	e := onRedis(t)
	var lost atomic.Int32
	var mu sync.Mutex
	var rounds [][2]time.Time
	roundEnded := make(chan int, 1) // the holds the round renewed
	c, err := reentrant.New(jittery{Client: e.rdb(t), max: 3 * time.Millisecond}, reentrant.Options{
		WatchdogTimeout: 60 * time.Millisecond,
		OnLockLost:      func(string, reentrant.Owner, error) { lost.Add(1) },
		Hooks: reentrant.Hooks{Renewed: func(r reentrant.Renewal) {
			end := time.Now()
			mu.Lock()
			rounds = append(rounds, [2]time.Time{end.Add(-r.Duration), end})
			mu.Unlock()
			select {
			case roundEnded <- r.Holds:
			default:
			}
		}},
	})
	require.NoError(t, err)
	defer c.Close()
	// A hold kept all along keeps the rounds coming.
	keeper, err := c.Lock("keeper").Lock(bg())
	require.NoError(t, err)

	var unlocks [][2]time.Time
	l := c.Lock("zombie")
	abandoned := 0
	for i := 0; i < 300; i++ {
		ctx, cancel := bg(), context.CancelFunc(func() {})
		if i%2 == 1 {
			ctx, cancel = context.WithTimeout(bg(), rand.N(8*time.Millisecond))
		}
		held, err := l.Lock(ctx)
		cancel()
		if i%2 == 1 && err != nil {
			abandoned++
			continue // its attempt, if it took the lock, is undone behind it
		}
		require.NoError(t, err)
		time.Sleep(rand.N(25 * time.Millisecond)) // to unlock at any point of a round
		start := time.Now()
		require.NoError(t, l.Unlock(held), "pair %d", i)
		unlocks = append(unlocks, [2]time.Time{start, time.Now()})
		if i%2 == 0 {
			require.Zero(t, e.int(t, "EXISTS", "zombie"), "pair %d: a key after Unlock returned nil", i)
		}
	}
	// The abandoned attempts are undone in the background; then nothing
	// keeps the name, and the rounds renew the keeper alone.
	eventually(t, "the abandoned attempts undone", func() bool { return e.int(t, "EXISTS", "zombie") == 0 })
	for range 3 {
		select {
		case <-roundEnded: // may be a round from before
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal round")
		}
	}
	for range 2 {
		select {
		case holds := <-roundEnded:
			assert.Equal(t, 1, holds, "the watchdog renews the keeper alone")
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal round")
		}
	}
	assert.Zero(t, e.int(t, "EXISTS", "zombie"), "no renewal brought the lock back or kept it")
	assert.Zero(t, lost.Load(), "a renewal that found a released hold gone reported no loss")
	require.NoError(t, c.Lock("keeper").Unlock(keeper))

	mu.Lock()
	defer mu.Unlock()
	overlapped := 0
	for _, u := range unlocks {
		for _, r := range rounds {
			if u[0].Before(r[1]) && r[0].Before(u[1]) {
				overlapped++
				break
			}
		}
	}
	t.Logf("%d of %d Unlocks overlapped a renewal round in flight; %d Lock calls gave up mid-attempt", overlapped, len(unlocks), abandoned)
	assert.Positive(t, overlapped, "the race the test is for never happened")
}
