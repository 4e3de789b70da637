package election_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// values returns the candidates' values in order, the leader's marked
// with a "*".
func values(cs []election.Candidate) []string {
	var out []string
	for _, c := range cs {
		v := c.Value
		if c.Leads {
			v += "*"
		}
		out = append(out, v)
	}
	return out
}

// standing waits until e's candidates are want (values(), in order).
func standing(t *testing.T, e *election.Election, want ...string) []election.Candidate {
	t.Helper()
	var cs []election.Candidate
	redistest.Eventually(t, 10*time.Second, "candidates "+strings.Join(want, ","), func() bool {
		var err error
		cs, err = e.Candidates(context.Background())
		require.NoError(t, err)
		return slices.Equal(values(cs), want)
	})
	return cs
}

// ownerOf returns the owner of the candidate standing with value.
func ownerOf(t *testing.T, cs []election.Candidate, value string) string {
	t.Helper()
	for _, c := range cs {
		if strings.TrimSuffix(c.Value, "*") == value {
			return c.Owner
		}
	}
	t.Fatalf("no candidate %q among %v", value, values(cs))
	return ""
}

// TestCandidatesListWhoStands: candidates on two clients are listed the
// longest standing first, the leader marked; a Campaign that ends leaves
// the list, as does a leader that resigns; an observer of the list sees
// each change.
func TestCandidatesListWhoStands(t *testing.T) {
	s := start(t)
	a, b := newNode(t, s, 0), newNode(t, s, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := b.election("roll").ObserveCandidates(ctx)
	first := redistest.Recv(t, watch)
	require.NoError(t, first.Err)
	assert.Empty(t, first.Candidates)

	leading, _, err := a.election("roll").Campaign(ctx, "A")
	require.NoError(t, err)
	bctx, bcancel := context.WithCancel(ctx)
	bgot := campaignAsync(bctx, b.election("roll"), "B")
	standing(t, a.election("roll"), "A*", "B")
	cgot := campaignAsync(ctx, a.election("roll"), "C")
	cs := standing(t, b.election("roll"), "A*", "B", "C")
	assert.True(t, cs[0].Since.Before(cs[1].Since) || cs[0].Since.Equal(cs[1].Since))
	for _, c := range cs {
		assert.Greater(t, c.TTL, time.Duration(0))
		_, err := reentrant.ParseOwner(c.Owner)
		assert.NoError(t, err)
	}
	// The observer saw the list grow to three.
	redistest.Eventually(t, 5*time.Second, "the observer sees three", func() bool {
		select {
		case o := <-watch:
			return o.Err == nil && len(o.Candidates) == 3
		default:
			return false
		}
	})

	bcancel()
	assert.ErrorIs(t, redistest.Recv(t, bgot).err, context.Canceled)
	standing(t, a.election("roll"), "A*", "C")
	require.NoError(t, a.election("roll").Resign(leading))
	c := redistest.Recv(t, cgot)
	require.NoError(t, c.err)
	standing(t, a.election("roll"), "C*")
	require.NoError(t, a.election("roll").Resign(c.held))
	standing(t, a.election("roll"))
	o := recvWithin(t, watch, 5*time.Second)
	require.NoError(t, o.Err)
}

// cutter dials a client's connections and can cut them all, refusing
// new ones: the client's process, as Redis sees it, is gone.
type cutter struct {
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func (c *cutter) dial(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("cut off")
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) cutAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		conn.Close()
	}
}

// TestDeadCandidateLeavesWithinItsLease: a candidate whose process is
// gone (every connection cut: nothing is released or announced) leaves
// the list when its registration's TTL runs out; an observer drops it
// within WatchdogTimeout and a little.
func TestDeadCandidateLeavesWithinItsLease(t *testing.T) {
	s := start(t)
	const wd = time.Second
	a := newNode(t, s, 0)
	var links cutter
	dying, err := reentrant.New(s.Client(func(o *rueidis.ClientOption) { o.DialCtxFn = links.dial }), reentrant.Options{WatchdogTimeout: wd, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dying.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading, _, err := a.election("dead").Campaign(ctx, "A")
	require.NoError(t, err)
	defer a.election("dead").Resign(leading)
	_ = campaignAsync(ctx, election.New(dying, "dead", election.Options{}), "B")
	standing(t, a.election("dead"), "A*", "B")
	watch := a.election("dead").ObserveCandidates(ctx)
	require.Len(t, redistest.Recv(t, watch).Candidates, 2)

	links.cutAll()
	died := time.Now()
	for {
		o := recvWithin(t, watch, 3*wd)
		require.NoError(t, o.Err)
		if len(o.Candidates) == 1 {
			break
		}
	}
	gone := time.Since(died)
	t.Logf("a dead candidate left the list %v after its connections were cut (WatchdogTimeout %v)", gone.Round(time.Millisecond), wd)
	// Its registration had at most wd left; the observer reads when it
	// runs out. 400ms of slack for a busy machine; a missed expiry read
	// would wait for the 10s resync.
	assert.Less(t, gone, wd+400*time.Millisecond)
	// And not before its registration could have run out: a third of wd
	// at least is left after a renewal round (every wd/3).
	assert.Greater(t, gone, wd/3)
}

// seat is one campaign of a test: its value, its node, what it returned.
type seat struct {
	value string
	n     node
	got   <-chan led
}

// stand campaigns on n with value and waits until it stands.
func stand(ctx context.Context, t *testing.T, n node, name, value string) seat {
	t.Helper()
	got := campaignAsync(ctx, n.election(name), value)
	redistest.Eventually(t, 10*time.Second, value+" stands", func() bool {
		cs, err := n.election(name).Candidates(ctx)
		require.NoError(t, err)
		return slices.ContainsFunc(cs, func(c election.Candidate) bool { return c.Value == value })
	})
	return seat{value, n, got}
}

// TestResignToANamedSuccessor: with three candidates waiting on three
// clients, the leader resigns to the one that stood last, five times over:
// each time that one leads, in a larger term, while the others go on
// waiting, and the old leader stands again. A plain release wakes all
// three, and the one named would win every round by chance once in 243.
func TestResignToANamedSuccessor(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := []node{newNode(t, s, 0), newNode(t, s, 0), newNode(t, s, 0), newNode(t, s, 0)}
	leading, term, err := nodes[0].election("named").Campaign(ctx, "n0")
	require.NoError(t, err)
	leader := seat{value: "n0", n: nodes[0]}
	var waiting []seat
	for i := 1; i < 4; i++ {
		waiting = append(waiting, stand(ctx, t, nodes[i], "named", fmt.Sprintf("n%d", i)))
	}
	for round := 0; round < 5; round++ {
		cs, err := leader.n.election("named").Candidates(ctx)
		require.NoError(t, err)
		require.Len(t, cs, 4, "%v", values(cs))
		last := cs[len(cs)-1]
		next := slices.IndexFunc(waiting, func(w seat) bool { return w.value == last.Value })
		require.GreaterOrEqual(t, next, 0)
		begun := time.Now()
		require.NoError(t, leader.n.election("named").Resign(leading, election.To(last.Owner)))
		l := recvWithin(t, waiting[next].got, 5*time.Second)
		require.NoError(t, l.err)
		t.Logf("round %d: %s led %v after the Resign began", round, last.Value, time.Since(begun).Round(time.Microsecond))
		assert.Greater(t, l.term, term)
		for i, w := range waiting {
			if i == next {
				continue
			}
			select {
			case other := <-w.got:
				t.Fatalf("%s led too, or stopped: %+v", w.value, other)
			default:
			}
		}
		old := leader
		leader, leading, term = waiting[next], l.held, l.term
		waiting = slices.Delete(waiting, next, next+1)
		waiting = append(waiting, stand(ctx, t, old.n, "named", fmt.Sprintf("%s.%d", old.value, round)))
	}
	require.NoError(t, leader.n.election("named").Resign(leading))
}

// TestResignToNext: ToNext hands leadership to the candidate that stood
// longest, not to one a release would wake; To naming a candidate that
// no longer stands does the same; with nobody standing the lock is
// released.
func TestResignToNext(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b, c := newNode(t, s, 0), newNode(t, s, 0), newNode(t, s, 0)
	leading, _, err := a.election("next").Campaign(ctx, "A")
	require.NoError(t, err)
	first := stand(ctx, t, b, "next", "B")
	second := stand(ctx, t, c, "next", "C")
	require.NoError(t, a.election("next").Resign(leading, election.ToNext()))
	l := recvWithin(t, first.got, 5*time.Second)
	require.NoError(t, l.err)

	gone := c.c.NewOwner() // stands nowhere
	require.NoError(t, b.election("next").Resign(l.held, election.To(gone.String())))
	l = recvWithin(t, second.got, 5*time.Second)
	require.NoError(t, l.err, "a successor that does not stand: the one standing longest leads")

	require.NoError(t, c.election("next").Resign(l.held, election.ToNext()))
	_, err = a.election("next").Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	held, ok, err := a.c.FencedLock("next").TryLock(ctx)
	require.NoError(t, err)
	assert.True(t, ok, "nobody to hand to: released")
	require.NoError(t, a.c.FencedLock("next").Unlock(held))
}

// TestRequestResign: a Client that does not campaign asks the leader to
// resign to a named candidate: the leader's Run sees its leading context
// end with ErrResignRequested, resigns to that candidate, and stands again;
// with LeaveOnRequest, Run returns instead. Requests with nobody leading,
// or naming no candidate or the leader, are refused and change nothing.
func TestRequestResign(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b, c, asker := newNode(t, s, 0), newNode(t, s, 0), newNode(t, s, 0), newNode(t, s, 0)
	ask := asker.election("asked")
	_, err := ask.RequestResign(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)

	causes := make(chan error, 4)
	runs := make(chan error, 1)
	go func() {
		runs <- a.election("asked").Run(ctx, "A", func(leading context.Context, term election.Term) error {
			<-leading.Done()
			causes <- context.Cause(leading)
			return nil
		})
	}()
	standing(t, ask, "A*")
	bs := stand(ctx, t, b, "asked", "B")
	cs := stand(ctx, t, c, "asked", "C")
	roll := standing(t, ask, "A*", "B", "C")

	_, err = ask.RequestResign(ctx, election.To(c.c.NewOwner().String()))
	assert.ErrorIs(t, err, election.ErrNotCandidate)
	_, err = ask.RequestResign(ctx, election.To(roll[0].Owner))
	assert.ErrorIs(t, err, election.ErrNotCandidate, "the leader itself")
	select {
	case cause := <-causes:
		t.Fatalf("a refused request ended the leader: %v", cause)
	default:
	}

	begun := time.Now()
	asked, err := ask.RequestResign(ctx, election.To(ownerOf(t, roll, "C")))
	require.NoError(t, err)
	assert.Equal(t, roll[0].Owner, asked.Owner)
	assert.ErrorIs(t, recvWithin(t, causes, 5*time.Second), election.ErrResignRequested)
	l := recvWithin(t, cs.got, 5*time.Second)
	require.NoError(t, l.err)
	t.Logf("the named candidate led %v after the request", time.Since(begun).Round(time.Microsecond))
	standing(t, ask, "B", "C*", "A")

	// A request with no successor named goes to the one standing
	// longest: B, not A, whose Run stood again just now.
	_, err = ask.RequestResign(ctx)
	require.NoError(t, err)
	redistest.Eventually(t, 5*time.Second, "C is asked", func() bool {
		return errors.Is(context.Cause(l.held), election.ErrResignRequested)
	})
	require.NoError(t, c.election("asked").Resign(l.held))
	l = recvWithin(t, bs.got, 5*time.Second)
	require.NoError(t, l.err)
	standing(t, ask, "B*", "A")

	// A Run with LeaveOnRequest, given leadership, returns when asked.
	leaves := make(chan error, 1)
	go func() {
		e := election.New(c.c, "asked", election.Options{LeaveOnRequest: true})
		leaves <- e.Run(ctx, "D", func(leading context.Context, term election.Term) error {
			<-leading.Done()
			return nil
		})
	}()
	roll = standing(t, ask, "B*", "A", "D")
	require.NoError(t, b.election("asked").Resign(l.held, election.To(ownerOf(t, roll, "D"))))
	standing(t, ask, "A", "D*")
	_, err = ask.RequestResign(ctx)
	require.NoError(t, err)
	assert.ErrorIs(t, recvWithin(t, leaves, 5*time.Second), election.ErrResignRequested)
	standing(t, ask, "A*")
	cancel()
	require.ErrorIs(t, recvWithin(t, runs, 5*time.Second), context.Canceled)
}

// TestRequestResignNeedsRights: a Redis user whose keys are not the
// election's (another service's, ~jobs:*) is refused with ErrNoPermission
// and changes nothing; the leader goes on.
func TestRequestResignNeedsRights(t *testing.T) {
	s := start(t)
	ctx := context.Background()
	a := newNode(t, s, 0)
	leading, _, err := a.election("rights").Campaign(ctx, "A")
	require.NoError(t, err)
	var rules []string
	for _, r := range append(redistest.DocumentedACL(t, "locks"), redistest.DocumentedACL(t, "elections")...) {
		if r == "~*" {
			r = "~jobs:*"
		}
		rules = append(rules, r)
	}
	other := election.New(aclClient(t, s, "other", rules...), "rights", election.Options{})
	_, err = other.RequestResign(ctx)
	assert.ErrorIs(t, err, reentrant.ErrNoPermission)
	assert.NotContains(t, err.Error(), "@user_script")
	assert.NoError(t, leading.Err(), "the leader goes on")
	n, err := s.Do("HEXISTS", "relock_election:{rights}", "request").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, a.election("rights").Resign(leading))
}

// TestLostLeaderLeavesTheRoll: a leader whose lock is lost stops standing
// when its leading context ends, with no Resign: the next leader lists it
// no more, and cannot hand leadership back to a Campaign that has ended.
func TestLostLeaderLeavesTheRoll(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := newNode(t, s, time.Second), newNode(t, s, time.Second)
	leading, _, err := a.election("lost").Campaign(ctx, "A")
	require.NoError(t, err)
	next := stand(ctx, t, b, "lost", "B")
	require.NoError(t, s.Do("DEL", "lost").Error()) // A's hold gone, as an expiry would
	select {
	case <-leading.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not told within 5s (a renewal comes every third of a second)")
	}
	require.ErrorIs(t, context.Cause(leading), reentrant.ErrLockLost)
	l := recvWithin(t, next.got, 5*time.Second)
	require.NoError(t, l.err)
	standing(t, b.election("lost"), "B*")
	require.NoError(t, b.election("lost").Resign(l.held, election.ToNext()))
}
