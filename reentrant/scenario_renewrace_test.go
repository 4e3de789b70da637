package reentrant_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// renewGate passes calls on to Redis, each delayed by up to jitter before
// it is sent and again after its reply came (late acquire replies), and,
// once armed, holds the watchdog's next renewal call back until the test
// lets it go: a renewal sent before Unlock that Redis runs after it.
type renewGate struct {
	rueidis.Client
	jitter time.Duration
	sha    string // renew.lua's
	armed  atomic.Bool
	held   chan chan struct{} // a held-back renewal, and how to let it go
}

func newRenewGate(t *testing.T, rdb rueidis.Client, jitter time.Duration) *renewGate {
	body, err := os.ReadFile("../scripts/renew.lua")
	require.NoError(t, err)
	sum := sha1.Sum(body)
	return &renewGate{Client: rdb, jitter: jitter, sha: hex.EncodeToString(sum[:]), held: make(chan chan struct{}, 1)}
}

func (g *renewGate) pass(cmds ...rueidis.Completed) {
	time.Sleep(rand.N(g.jitter))
	for _, c := range cmds {
		if args := c.Commands(); len(args) > 1 && args[0] == "EVALSHA" && args[1] == g.sha && g.armed.CompareAndSwap(true, false) {
			letGo := make(chan struct{})
			g.held <- letGo
			<-letGo
			return
		}
	}
}

func (g *renewGate) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	g.pass(cmd)
	defer time.Sleep(rand.N(g.jitter))
	return g.Client.Do(ctx, cmd)
}

func (g *renewGate) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	g.pass(cmds...)
	defer time.Sleep(rand.N(g.jitter))
	return g.Client.DoMulti(ctx, cmds...)
}

// Redisson #7272 (and #1966, renewals armed after a timed-out attempt and
// never stopped): a watchdog renewal must not outlive the hold it keeps:
// neither one the watchdog sent before Unlock that Redis runs after it, nor
// one for an acquire whose reply came after its caller gave up (Redisson then
// arms the renewal after the unlock, for good). 40 times a renewal round is
// held back while Unlock runs, then let go; 100 Lock calls end their ctx at a
// random moment of their attempt, with every call delayed at random. No key is
// left once Unlock returns nil; once the given-up attempts are undone the
// watchdog renews nothing but the hold kept all along; no hold is reported
// lost.
func TestNoRenewalOutlivesUnlock(t *testing.T) {
	e := onRedis(t)
	gate := newRenewGate(t, e.rdb(t), 2*time.Millisecond)
	var lost atomic.Int32
	roundEnded := make(chan int, 1) // the holds the round renewed
	c, err := reentrant.New(gate, reentrant.Options{
		WatchdogTimeout: 600 * time.Millisecond,
		OnLockLost:      func(string, reentrant.Owner, error) { lost.Add(1) },
		Hooks: reentrant.Hooks{Renewed: func(r reentrant.Renewal) {
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
	l := c.Lock("zombie")

	for i := 0; i < 40; i++ {
		held, err := l.Lock(bg())
		require.NoError(t, err)
		gate.armed.Store(true)
		var letGo chan struct{}
		select {
		case letGo = <-gate.held:
		case <-time.After(10 * time.Second):
			t.Fatalf("pair %d: no renewal round", i)
		}
		unlocked := make(chan error, 1)
		go func() { unlocked <- l.Unlock(held) }()
		select {
		case err = <-unlocked:
		case <-time.After(10 * time.Second):
			close(letGo)
			t.Fatalf("pair %d: Unlock waited for the renewal round", i)
		}
		require.NoError(t, err, "pair %d", i)
		close(letGo) // the renewal, sent before Unlock, runs after it
		require.Zero(t, e.int(t, "EXISTS", "zombie"), "pair %d: a key after Unlock returned nil", i)
	}

	abandoned := 0
	for i := 0; i < 100; i++ {
		ctx, cancel := context.WithTimeout(bg(), rand.N(8*time.Millisecond))
		held, err := l.Lock(ctx)
		cancel()
		if err != nil {
			abandoned++
			continue // its attempt, if it took the lock, is undone behind it
		}
		require.NoError(t, l.Unlock(held))
	}
	t.Logf("%d of 100 Lock calls gave up mid-attempt", abandoned)

	// The given-up attempts are undone in the background; then nothing
	// keeps the name, and the rounds renew the keeper alone.
	eventually(t, "the given-up attempts undone", func() bool { return e.int(t, "EXISTS", "zombie") == 0 })
	for range 2 {
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
}
