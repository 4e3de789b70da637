package election_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// TestRecordWaitsForReplicas: on a Client with ReplicaSync, the record's
// writes (Proclaim, Resign) are followed by WAIT as the lock's are.
func TestRecordWaitsForReplicas(t *testing.T) {
	r := redistest.StartReplicated(t, 1)
	c, err := reentrant.New(r.Master.Client(), reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: 5 * time.Second}})
	require.NoError(t, err)
	defer c.Close()
	e := election.New(c, "synced", election.Options{})
	ctx := context.Background()
	leading, _, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	waits := func() int64 { return r.Master.CommandStats()["wait"].Calls }
	before := waits()
	require.NoError(t, e.Proclaim(leading, "b"))
	assert.Equal(t, before+1, waits(), "Proclaim's record write waited for the replica")
	require.NoError(t, e.Resign(leading))
}

// TestNoChannelRights: a Client whose user may not use relock's channels
// campaigns, resigns and observes: nothing is published, and the observer
// reads every RepollInterval instead.
func TestNoChannelRights(t *testing.T) {
	s := start(t)
	require.NoError(t, s.Do("ACL", "SETUSER", "nochannels", "on", ">pw", "~*", "resetchannels", "+@all").Error())
	rdb := s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "nochannels", "pw" })
	c, err := reentrant.New(rdb, reentrant.Options{RepollInterval: 50 * time.Millisecond, Logger: quiet()})
	require.NoError(t, err)
	defer c.Close()
	e := election.New(c, "quiet", election.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := e.Observe(ctx)
	require.NoError(t, redistest.Recv(t, seen).Err)
	leading, term, err := e.Campaign(ctx, "a")
	require.NoError(t, err, "a campaign publishes nothing, so it is not refused")
	o := recvWithin(t, seen, 2*time.Second)
	require.NoError(t, o.Err)
	assert.Equal(t, term, o.Term, "seen by reading again, not by a message")
	require.NoError(t, e.Resign(leading))
	assert.Equal(t, "", recvWithin(t, seen, 2*time.Second).Owner)
}

// TestCloseEndsObserversAndLeaders: the Client's Close ends an observer
// with a last Observed saying ErrClosed, cancels the leading context with
// ErrClosed and tells the hooks Lost; every later call says ErrClosed.
func TestCloseEndsObserversAndLeaders(t *testing.T) {
	s := start(t)
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	lost := make(chan error, 1)
	e := election.New(c, "closing", election.Options{Hooks: election.Hooks{Lost: func(_ string, _ election.Term, cause error) { lost <- cause }}})
	ctx := context.Background()
	seen := e.Observe(ctx)
	redistest.Recv(t, seen)
	leading, _, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	var last election.Observed
	for o := range seen { // closed by Close, though ctx lives on
		last = o
	}
	assert.ErrorIs(t, last.Err, reentrant.ErrClosed)
	assert.ErrorIs(t, context.Cause(leading), reentrant.ErrClosed)
	assert.ErrorIs(t, redistest.Recv(t, lost), reentrant.ErrClosed)
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, reentrant.ErrClosed)
	_, _, err = e.Campaign(ctx, "b")
	assert.ErrorIs(t, err, reentrant.ErrClosed)
	o, ok := <-e.Observe(ctx)
	assert.True(t, ok)
	assert.ErrorIs(t, o.Err, reentrant.ErrClosed)
	assert.ErrorIs(t, election.NewFenced(c).Set(ctx, "k", 1, "v"), reentrant.ErrClosed)
}

// TestRunPanicResigns: a panic in Run's fn resigns before it goes on, so
// a caller that recovers it leaves nobody leading, and the next candidate
// leads at once.
func TestRunPanicResigns(t *testing.T) {
	s := start(t)
	e := newNode(t, s, 0).election("panics")
	ctx := context.Background()
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = e.Run(ctx, "a", func(context.Context, election.Term) error { panic("boom") })
	}()
	_, err := e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	held, ok, err := newNode(t, s, 0).c.FencedLock("panics").TryLock(ctx)
	require.NoError(t, err)
	assert.True(t, ok, "the lock was released, not left to the watchdog")
	_ = held
}

// TestRunReturnsCtxError: ctx ends while fn leads and fn returns nil:
// Run returns ctx's error, as documented.
func TestRunReturnsCtxError(t *testing.T) {
	s := start(t)
	e := newNode(t, s, 0).election("ctx")
	ctx, cancel := context.WithCancel(context.Background())
	err := e.Run(ctx, "a", func(context.Context, election.Term) error {
		cancel()
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
}

// TestOneLeadershipPerCampaign: a nested Campaign is refused; Resign
// twice, or with another election's leading context, is ErrNotLeader.
func TestOneLeadershipPerCampaign(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	a, b := n.election("a"), n.election("b")
	ctx := context.Background()
	leadingA, _, err := a.Campaign(ctx, "v")
	require.NoError(t, err)
	_, _, err = a.Campaign(leadingA, "v")
	assert.ErrorIs(t, err, reentrant.ErrReentry)
	leadingB, _, err := b.Campaign(leadingA, "v") // another election, under a's leadership
	require.NoError(t, err)
	assert.ErrorIs(t, a.Resign(leadingB) /* b's context carries a's leadership too */, nil)
	_, err = a.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	assert.ErrorIs(t, a.Resign(leadingA), election.ErrNotLeader, "resigned already")
	assert.ErrorIs(t, a.Resign(leadingB), election.ErrNotLeader)
	l, err := b.Leader(ctx)
	require.NoError(t, err, "b still leads")
	assert.Equal(t, "v", l.Value)
	require.NoError(t, b.Resign(leadingB))
	assert.ErrorIs(t, b.Resign(leadingB), election.ErrNotLeader)
}

// TestBadInputsSayWhy: an empty name, a nil ctx, a corrupted record: an
// error of relock's, never a panic, a raw script error or "no leader".
func TestBadInputsSayWhy(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	ctx := context.Background()
	empty := election.New(n.c, "", election.Options{})
	_, err := empty.Leader(ctx)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	o := <-empty.Observe(ctx)
	assert.ErrorIs(t, o.Err, reentrant.ErrInvalidArgument)
	_, _, err = empty.Campaign(ctx, "v")
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	e := n.election("corrupt")
	var nilCtx context.Context
	_, err = e.Leader(nilCtx)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	require.NoError(t, s.Do("SET", "relock_election:{corrupt}", "x").Error())
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.NotContains(t, err.Error(), "@user_script")
	o = recvWithin(t, e.Observe(ctx), 2*time.Second)
	assert.ErrorIs(t, o.Err, reentrant.ErrWrongType, "an observer says it cannot see, not that nobody leads")
}

// TestResignFindsLoss: a leader whose lock is gone and whose watchdog has
// not noticed yet resigns: Resign says ErrLockLost, and the leading
// context ends with that cause, as Campaign's doc says.
func TestResignFindsLoss(t *testing.T) {
	s := start(t)
	e := newNode(t, s, 0).election("paused") // a 30 s watchdog: it does not notice first
	leading, _, err := e.Campaign(context.Background(), "a")
	require.NoError(t, err)
	require.NoError(t, s.Do("DEL", "paused").Error())
	assert.ErrorIs(t, e.Resign(leading), reentrant.ErrLockLost)
	assert.ErrorIs(t, context.Cause(leading), reentrant.ErrLockLost)
}

// TestObserverTellsItCannotSee: Redis goes away under an observer: it
// says it cannot see, with the last leader, within a second or two (not
// "nobody leads", and not silence), and sees again once Redis is back.
func TestObserverTellsItCannotSee(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	e := n.election("outage")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, term, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	seen := e.Observe(ctx)
	require.Equal(t, term, redistest.Recv(t, seen).Term)
	s.Stop()
	o := recvWithin(t, seen, 3*time.Second)
	require.Error(t, o.Err, "the observer says it cannot see")
	assert.Equal(t, term, o.Term, "with the last leader seen")
	assert.NotEqual(t, "", o.Owner)
	s.Restart() // without its data: nobody leads now
	o = redistest.Recv(t, seen)
	require.NoError(t, o.Err, "it sees again")
	assert.Equal(t, "", o.Owner)
}

// recvWithin receives from ch, failing the test if nothing comes within d:
// a bound the docs promise, with slack for a loaded machine.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("nothing came within %v", d)
		var zero T
		return zero
	}
}

// quiet is a logger for clients whose warnings a test expects.
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestFencedRefusesBadInput: a key of another type, a fence's own key, a
// corrupted fence, terms below 1 and an empty key are refused with an
// error that says so, and nothing changes.
func TestFencedRefusesBadInput(t *testing.T) {
	s := start(t)
	f := election.NewFenced(newNode(t, s, 0).c)
	ctx := context.Background()
	require.NoError(t, s.Do("HSET", "ahash", "f", "v").Error())
	assert.ErrorIs(t, f.Set(ctx, "ahash", 5, "x"), reentrant.ErrWrongType)
	_, _, err := f.Get(ctx, "ahash", 5)
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	v, _ := s.Do("HGET", "ahash", "f").ToString()
	assert.Equal(t, "v", v, "the hash is as it was")
	assert.Equal(t, int64(0), mustInt(s.Do("EXISTS", "relock_fence:{ahash}")), "no fence written")

	require.NoError(t, f.Set(ctx, "config", 5, "v5"))
	assert.ErrorIs(t, f.Set(ctx, "relock_fence:{config}", 9, "1"), reentrant.ErrInvalidArgument)
	seen, _ := s.Do("GET", "relock_fence:{config}").ToString()
	assert.Equal(t, "5", seen, "the fence is as it was")
	for _, term := range []election.Term{0, -1} {
		assert.ErrorIs(t, f.Set(ctx, "config", term, "x"), reentrant.ErrInvalidArgument, "term %d", term)
	}
	assert.ErrorIs(t, f.Set(ctx, "", 6, "x"), reentrant.ErrInvalidArgument)

	require.NoError(t, s.Do("SET", "relock_fence:{config}", "abc").Error())
	err = f.Set(ctx, "config", 6, "v6")
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.NotContains(t, err.Error(), "@user_script")
	got, _ := s.Do("GET", "config").ToString()
	assert.Equal(t, "v5", got)
	// Terms are compared as numbers: 9 after 10 is stale.
	require.NoError(t, f.Set(ctx, "numbers", 10, "ten"))
	assert.ErrorIs(t, f.Set(ctx, "numbers", 9, "nine"), election.ErrStaleTerm)
}

func mustInt(r rueidis.RedisResult) int64 {
	n, _ := r.AsInt64()
	return n
}

// TestDocumentedACLUsers: the user docs/deployment.md gives for locks and
// elections campaigns, observes, proclaims, resigns and fences with
// nothing refused; a user with the locks' line alone is told, in one
// error that names the right it lacks, by Leader and by an observer.
func TestDocumentedACLUsers(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	locks, elections := redistest.DocumentedACL(t, "locks"), redistest.DocumentedACL(t, "elections")

	c := aclClient(t, s, "elector", append(locks, elections...)...)
	e := election.New(c, "acl", election.Options{})
	seen := e.Observe(ctx)
	require.NoError(t, redistest.Recv(t, seen).Err)
	leading, term, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	o := redistest.Recv(t, seen)
	require.NoError(t, o.Err)
	assert.Equal(t, term, o.Term)
	require.NoError(t, e.Proclaim(leading, "b"))
	l, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", l.Value)
	f := election.NewFenced(c)
	require.NoError(t, f.Set(ctx, "acl-config", term, "v"))
	_, _, err = f.Get(ctx, "acl-config", term)
	require.NoError(t, err)
	require.NoError(t, e.Resign(leading))

	short := election.New(aclClient(t, s, "locksonly", locks...), "acl", election.Options{})
	_, err = short.Leader(ctx)
	assert.ErrorIs(t, err, reentrant.ErrNoPermission)
	assert.ErrorContains(t, err, "+hmget")
	assert.NotContains(t, err.Error(), "@user_script")
	o = recvWithin(t, short.Observe(ctx), 5*time.Second)
	assert.ErrorIs(t, o.Err, reentrant.ErrNoPermission, "an observer says it cannot see, and why")
}

// aclClient is a Client of s that connects as a new ACL user with rules.
func aclClient(t *testing.T, s *redistest.Server, user string, rules ...string) *reentrant.Client {
	t.Helper()
	require.NoError(t, s.Do(append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw"}, rules...)...).Error())
	c, err := reentrant.New(s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = user, "pw" }), reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
