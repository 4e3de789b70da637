package election_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/reentranttest"
)

// TestMain checks that no goroutine outlives a test, but rueidis's cluster
// client's: its map refreshes and delayed calls end on their own, after
// Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// node is one process's view: its rueidis client and relock client.
type node struct {
	rdb rueidis.Client
	c   *reentrant.Client
}

// start starts a redis-server and returns it.
func start(t testing.TB) *redistest.Server {
	t.Helper()
	return redistest.Start(t)
}

// newNode makes a client of s with watchdog timeout wd (0: the default),
// closed when the test ends.
func newNode(t testing.TB, s *redistest.Server, wd time.Duration) node {
	t.Helper()
	rdb := s.Client()
	c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: wd})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return node{rdb, c}
}

func (n node) election(name string) *election.Election {
	return election.New(n.c, name, election.Options{})
}

// led is what a Campaign returned.
type led struct {
	held context.Context
	term election.Term
	err  error
}

// campaignAsync campaigns in e on a goroutine of its own; the channel
// receives what Campaign returned.
func campaignAsync(ctx context.Context, e *election.Election, value string) <-chan led {
	got := make(chan led, 1)
	go func() {
		held, term, err := e.Campaign(ctx, value)
		got <- led{held, term, err}
	}()
	return got
}

// TestOneLeaderAmongEight runs 8 candidates on 4 clients, each leading 3
// times: never two leaders at once, and terms strictly increasing in the
// order leaders came.
func TestOneLeaderAmongEight(t *testing.T) {
	s := start(t)
	nodes := make([]node, 4)
	for i := range nodes {
		nodes[i] = newNode(t, s, 0)
	}
	ctx := context.Background()
	var mu sync.Mutex
	leading := 0
	var terms []election.Term
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := nodes[i%4].election("leader")
			for range 3 {
				held, term, err := e.Campaign(ctx, "candidate")
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				leading++
				assert.Equal(t, 1, leading, "two leaders at once")
				terms = append(terms, term)
				mu.Unlock()
				got, err := e.Leader(ctx)
				assert.NoError(t, err)
				assert.Equal(t, term, got.Term, "Leader reads the leader's own term")
				mu.Lock()
				leading--
				mu.Unlock()
				assert.NoError(t, e.Resign(held))
			}
		}()
	}
	redistest.Wait(t, &wg)
	require.Len(t, terms, 24)
	for i := 1; i < len(terms); i++ {
		assert.Greater(t, terms[i], terms[i-1], "term %d", i)
	}
}

// TestResignHandsOver: a candidate waiting behind the leader leads once
// the leader resigns, with a larger term, and the record names it.
func TestResignHandsOver(t *testing.T) {
	s := start(t)
	a, b := newNode(t, s, 0).election("job"), newNode(t, s, 0).election("job")
	ctx := context.Background()
	heldA, termA, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	got := campaignAsync(ctx, b, "b")
	select {
	case r := <-got:
		t.Fatalf("b leads while a does: %+v", r)
	case <-time.After(50 * time.Millisecond): // b is most likely waiting; if not, the check below still holds
	}
	require.NoError(t, a.Resign(heldA))
	assert.ErrorIs(t, context.Cause(heldA), context.Canceled)
	r := redistest.Recv(t, got)
	require.NoError(t, r.err)
	assert.Greater(t, r.term, termA)
	l, err := b.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", l.Value)
	assert.Equal(t, r.term, l.Term)
	require.NoError(t, b.Resign(r.held))
	_, err = b.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
}

// TestObserve sees every change in term order: nobody, a's term, a's new
// value, nobody, b's term; and again after its connection was killed.
func TestObserve(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	a, b := n.election("obs"), newNode(t, s, 0).election("obs")
	ctx, cancel := context.WithCancel(context.Background())
	seen := a.Observe(ctx)
	ctx0 := context.Background()

	first := redistest.Recv(t, seen)
	assert.Equal(t, "", first.Owner, "nobody leads at first")

	heldA, termA, err := a.Campaign(ctx0, "a1")
	require.NoError(t, err)
	l := redistest.Recv(t, seen)
	assert.Equal(t, termA, l.Term)
	assert.Equal(t, "a1", l.Value)
	owner, _ := reentrant.OwnerFrom(heldA)
	assert.Equal(t, owner.String(), l.Owner)

	require.NoError(t, a.Proclaim(heldA, "a2"))
	l = redistest.Recv(t, seen)
	assert.Equal(t, termA, l.Term, "Proclaim keeps the term")
	assert.Equal(t, "a2", l.Value)

	require.NoError(t, a.Resign(heldA))
	l = redistest.Recv(t, seen)
	assert.Equal(t, "", l.Owner)

	// The observer's connection dies: it subscribes and reads again, and
	// misses nothing that changed meanwhile.
	require.NoError(t, s.Do("CLIENT", "KILL", "TYPE", "pubsub").Error())
	heldB, termB, err := b.Campaign(ctx0, "b")
	require.NoError(t, err)
	l = redistest.Recv(t, seen)
	assert.Equal(t, termB, l.Term)
	assert.Greater(t, termB, termA)
	assert.Equal(t, "b", l.Value)
	require.NoError(t, b.Resign(heldB))
	assert.Equal(t, "", redistest.Recv(t, seen).Owner)

	cancel()
	for range seen { // drained and closed when ctx ends
	}
}

// TestDeadLeaderReplaced: a leader that can no longer reach Redis is told
// (its leading context cancelled with ErrLockLost) before the candidate
// waiting behind it leads, once its hold's TTL ends; the observer shows
// nobody, then the new leader.
func TestDeadLeaderReplaced(t *testing.T) {
	s := start(t)
	const wd = time.Second
	cut := newNode(t, s, wd)
	a := cut.election("dead")
	b := newNode(t, s, wd).election("dead")
	ctx := context.Background()
	heldA, termA, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	obsCtx, stop := context.WithCancel(ctx)
	defer stop()
	seen := b.Observe(obsCtx)
	require.Equal(t, termA, redistest.Recv(t, seen).Term)

	type result struct {
		term   election.Term
		aEnded bool // a's leading context had ended when b led
		err    error
	}
	got := make(chan result, 1)
	go func() {
		held, term, err := b.Campaign(ctx, "b")
		got <- result{term, heldA.Err() != nil, err}
		if err == nil {
			_ = b.Resign(held)
		}
	}()
	cut.rdb.Close() // a's process can no longer reach Redis: its renewals fail
	<-heldA.Done()
	assert.ErrorIs(t, context.Cause(heldA), reentrant.ErrLockLost)
	r := redistest.Recv(t, got)
	require.NoError(t, r.err)
	assert.True(t, r.aEnded, "a was told before b led")
	assert.Greater(t, r.term, termA)
	for l := redistest.Recv(t, seen); l.Term != r.term; l = redistest.Recv(t, seen) {
		assert.Equal(t, "", l.Owner, "between a and b, nobody")
	}
}

// TestRunCampaignsAgain: Run's fn sees its leadership lost when another
// process force-unlocks the lock, and Run campaigns again, with a larger
// term; fn's return while leading ends Run with fn's error.
func TestRunCampaignsAgain(t *testing.T) {
	s := start(t)
	n := newNode(t, s, time.Second)
	other := newNode(t, s, 0)
	e := n.election("run")
	var terms []election.Term
	done := errors.New("done")
	err := e.Run(context.Background(), "me", func(leading context.Context, term election.Term) error {
		terms = append(terms, term)
		if len(terms) == 2 {
			return done
		}
		_, err := other.c.FencedLock("run").ForceUnlock(context.Background())
		require.NoError(t, err)
		<-leading.Done()
		assert.ErrorIs(t, context.Cause(leading), reentrant.ErrLockLost)
		return leading.Err()
	})
	assert.ErrorIs(t, err, done)
	require.Len(t, terms, 2)
	assert.Greater(t, terms[1], terms[0])
	_, err = e.Leader(context.Background())
	assert.ErrorIs(t, err, election.ErrNoLeader, "Run resigned")
}

// TestFencedRefusesStaleTerms: a write or read with a term smaller than
// one the key has seen is refused, and changes nothing.
func TestFencedRefusesStaleTerms(t *testing.T) {
	s := start(t)
	f := election.NewFenced(newNode(t, s, 0).c)
	ctx := context.Background()
	require.NoError(t, f.Set(ctx, "config", 5, "v5"))
	assert.ErrorIs(t, f.Set(ctx, "config", 4, "v4"), election.ErrStaleTerm)
	v, found, err := f.Get(ctx, "config", 5)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "v5", v)
	// A read raises the term seen: the reader's predecessor may not write.
	_, _, err = f.Get(ctx, "config", 7)
	require.NoError(t, err)
	assert.ErrorIs(t, f.Set(ctx, "config", 6, "v6"), election.ErrStaleTerm)
	_, _, err = f.Get(ctx, "config", 6)
	assert.ErrorIs(t, err, election.ErrStaleTerm)
	v5, _ := s.Do("GET", "config").ToString()
	assert.Equal(t, "v5", v5)
	_, found, err = f.Get(ctx, "missing", 1)
	require.NoError(t, err)
	assert.False(t, found)
}

// TestBadInput: nil handles and contexts that do not lead are errors,
// never panics.
func TestBadInput(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	ctx := context.Background()
	_, _, err := election.New(nil, "x", election.Options{}).Campaign(ctx, "v")
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	var nilE *election.Election
	_, err = nilE.Leader(ctx)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	assert.Equal(t, "", nilE.Name())
	assert.ErrorIs(t, election.Fenced{}.Set(ctx, "k", 1, "v"), reentrant.ErrInvalidArgument)
	_, _, err = election.NewFenced(nil).Get(ctx, "k", 1)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	e := n.election("bad")
	assert.ErrorIs(t, e.Proclaim(ctx, "v"), election.ErrNotLeader)
	assert.ErrorIs(t, e.Resign(ctx), election.ErrNotLeader)
	held, err := n.c.FencedLock("other").Lock(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, e.Proclaim(held, "v"), election.ErrNotLeader, "a hold of another lock does not lead")
	require.NoError(t, n.c.FencedLock("other").Unlock(held))
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	assert.ErrorIs(t, e.Run(ctx, "v", nil), reentrant.ErrInvalidArgument)
}

// TestHooks: Elected then Resigned for a term given up, Elected then Lost
// (ErrLockLost) for one force-unlocked elsewhere; each once.
func TestHooks(t *testing.T) {
	s := start(t)
	n := newNode(t, s, time.Second)
	var mu sync.Mutex
	var events []string
	note := func(what string, term election.Term) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf("%s %d", what, term))
	}
	lost := make(chan error, 1)
	e := election.New(n.c, "hooked", election.Options{Hooks: election.Hooks{
		Elected:  func(_ string, term election.Term) { note("elected", term) },
		Resigned: func(_ string, term election.Term) { note("resigned", term) },
		Lost: func(_ string, term election.Term, cause error) {
			note("lost", term)
			lost <- cause
		},
	}})
	ctx := context.Background()
	held, t1, err := e.Campaign(ctx, "v")
	require.NoError(t, err)
	require.NoError(t, e.Resign(held))
	held, t2, err := e.Campaign(ctx, "v")
	require.NoError(t, err)
	_, err = newNode(t, s, 0).c.FencedLock("hooked").ForceUnlock(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, redistest.Recv(t, lost), reentrant.ErrLockLost)
	assert.ErrorIs(t, e.Resign(held), reentrant.ErrLockLost)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		fmt.Sprintf("elected %d", t1), fmt.Sprintf("resigned %d", t1),
		fmt.Sprintf("elected %d", t2), fmt.Sprintf("lost %d", t2),
	}, events)
}

// TestOnMiniredis: with reentranttest, a Campaign, an observer and a
// Resign work on miniredis, as they do on Redis.
func TestOnMiniredis(t *testing.T) {
	locks, _ := reentranttest.New(t, reentrant.Options{})
	e := election.New(locks, "mini", election.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := e.Observe(ctx)
	assert.Equal(t, "", redistest.Recv(t, seen).Owner)
	leading, term, err := e.Campaign(ctx, "v")
	require.NoError(t, err)
	assert.Equal(t, term, redistest.Recv(t, seen).Term)
	require.NoError(t, e.Resign(leading))
	assert.Equal(t, "", redistest.Recv(t, seen).Owner)
}

// TestObserveAfterDataLoss: Redis loses its data (the lock, the record
// and its term) under a leader: the observer stops showing it, by the
// hold's TTL at the latest, though nobody's term is now 0.
func TestObserveAfterDataLoss(t *testing.T) {
	s := start(t)
	n := newNode(t, s, time.Second)
	e := n.election("lost-data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := newNode(t, s, 0).election("lost-data").Observe(ctx)
	assert.Equal(t, "", redistest.Recv(t, seen).Owner)
	leading, term, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, term, redistest.Recv(t, seen).Term)
	require.NoError(t, s.Do("FLUSHALL").Error())
	l := redistest.Recv(t, seen)
	assert.Equal(t, "", l.Owner, "nobody leads once Redis forgot the leader")
	assert.Equal(t, election.Term(0), l.Term)
	<-leading.Done()
	assert.ErrorIs(t, context.Cause(leading), reentrant.ErrLockLost)
}
