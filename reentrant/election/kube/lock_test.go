package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// newClient returns a relock Client on s, closed when the test ends.
func newClient(t testing.TB, s *redistest.Server) *reentrant.Client {
	t.Helper()
	rdb := s.Client()
	c, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(); rdb.Close() })
	return c
}

func newLock(t testing.TB, s *redistest.Server, name, identity string) *kube.ResourceLock {
	return kube.NewResourceLock(newClient(t, s), name, resourcelock.ResourceLockConfig{Identity: identity})
}

// record is an elector's record naming holder, counting transitions.
func record(holder string, transitions int) resourcelock.LeaderElectionRecord {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15,
		AcquireTime: now, RenewTime: now, LeaderTransitions: transitions}
}

// TestResourceLockAsAnAPIServer: the errors the elector tells apart are
// the API server's: NotFound before the first record, AlreadyExists for a
// second Create, Conflict for an Update over a record another wrote since.
func TestResourceLockAsAnAPIServer(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	a, b := newLock(t, s, "ctrl", "a"), newLock(t, s, "ctrl", "b")

	_, _, err := a.Get(ctx)
	require.True(t, apierrors.IsNotFound(err), "Get with no record: %v", err)
	require.Error(t, a.Update(ctx, record("a", 0)), "an Update before any Get or Create")

	require.NoError(t, a.Create(ctx, record("a", 0)))
	require.True(t, apierrors.IsAlreadyExists(b.Create(ctx, record("b", 0))))
	assert.Positive(t, int64(a.Term()), "the first holder's term")

	got, raw, err := b.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a", got.HolderIdentity)
	assert.Equal(t, int(a.Term()), got.LeaderTransitions, "LeaderTransitions reads the fenced term")
	assert.Contains(t, string(raw), `"holderIdentity":"a"`)
	assert.Equal(t, a.Term(), b.Term())

	// a renews; b's Update over the version it read then is a Conflict.
	require.NoError(t, a.Update(ctx, record("a", got.LeaderTransitions)))
	err = b.Update(ctx, record("b", got.LeaderTransitions+1))
	require.True(t, apierrors.IsConflict(err), "an Update over a stale version: %v", err)
	got2, _, err := b.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a", got2.HolderIdentity, "the refused Update changed nothing")

	// Read again, b's Update goes through.
	require.NoError(t, b.Update(ctx, record("b", got2.LeaderTransitions+1)))
	assert.Greater(t, b.Term(), a.Term(), "a new holder's term")

	// The record gone, an Update is a NotFound.
	s.Do("DEL", "relock_lease:{ctrl}")
	require.True(t, apierrors.IsNotFound(b.Update(ctx, record("b", 0))))
}

// TestResourceLockTerms: renewals keep the term; a new holder, or the
// same one after the elector counted a transition, draws a larger one; a
// release keeps the last.
func TestResourceLockTerms(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	a, b := newLock(t, s, "terms", "a"), newLock(t, s, "terms", "b")

	require.NoError(t, a.Create(ctx, record("a", 0)))
	first := a.Term()
	for range 3 { // the elector's fast path: Update after Update, no Get
		require.NoError(t, a.Update(ctx, record("a", int(first))))
		assert.Equal(t, first, a.Term(), "a renewal keeps the term")
	}
	// The fast path right after a takeover counts the old term + 1, which
	// the new term is at least: still a renewal.
	require.NoError(t, a.Update(ctx, record("a", int(first))))

	// The same holder after the elector counted a transition (its lease
	// lapsed, or a restarted process with the same identity).
	require.NoError(t, a.Update(ctx, record("a", int(first)+1)))
	second := a.Term()
	assert.Greater(t, second, first)

	// A release keeps the term; the next holder draws a larger one.
	require.NoError(t, a.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, LeaderTransitions: int(second)}))
	assert.Equal(t, second, a.Term())
	got, _, err := b.Get(ctx)
	require.NoError(t, err)
	assert.Empty(t, got.HolderIdentity)
	require.NoError(t, b.Update(ctx, record("b", got.LeaderTransitions+1)))
	assert.Greater(t, b.Term(), second)

	// Terms come from the fenced lock's counter of the same name: an
	// election there draws past them.
	held, term, err := election.New(newClient(t, s), "terms", election.Options{}).Campaign(ctx, "x")
	require.NoError(t, err)
	assert.Greater(t, term, b.Term())
	_ = held
}

// TestResourceLockBadInput: bad input and a key of another type are
// errors errors.Is can tell, and change nothing.
func TestResourceLockBadInput(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	c := newClient(t, s)
	for name, l := range map[string]*kube.ResourceLock{
		"nil client":     kube.NewResourceLock(nil, "x", resourcelock.ResourceLockConfig{Identity: "a"}),
		"empty name":     kube.NewResourceLock(c, "", resourcelock.ResourceLockConfig{Identity: "a"}),
		"empty identity": kube.NewResourceLock(c, "x", resourcelock.ResourceLockConfig{}),
		"nil lock":       nil,
	} {
		_, _, err := l.Get(ctx)
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument, name)
		assert.ErrorIs(t, l.Create(ctx, record("a", 0)), reentrant.ErrInvalidArgument, name)
		assert.ErrorIs(t, l.Update(ctx, record("a", 0)), reentrant.ErrInvalidArgument, name)
	}
	l := kube.NewResourceLock(c, "x", resourcelock.ResourceLockConfig{Identity: "a"})
	//lint:ignore SA1012 a nil context is the point
	_, _, err := l.Get(nil) //nolint:staticcheck
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)

	s.Do("SET", "relock_lease:{x}", "not a record")
	_, _, err = l.Get(ctx)
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.ErrorIs(t, l.Create(ctx, record("a", 0)), reentrant.ErrWrongType)
	v, err := s.Do("GET", "relock_lease:{x}").ToString()
	require.NoError(t, err)
	assert.Equal(t, "not a record", v, "changed nothing")

	require.NoError(t, c.Close())
	_, _, err = l.Get(ctx)
	assert.ErrorIs(t, err, reentrant.ErrClosed)

	var none *kube.ResourceLock
	assert.Empty(t, none.Identity(), "a nil lock's methods do not panic")
	assert.Equal(t, "relock/<nil>", none.Describe())
	assert.Zero(t, none.Term())
}

// TestResourceLockCorruptedState: what is not a lease record, or a term
// counter that is not an integer, is ErrWrongType naming the key, and
// nothing changes; a lease below a second is ErrInvalidArgument.
func TestResourceLockCorruptedState(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	c := newClient(t, s)
	l := kube.NewResourceLock(c, "k", resourcelock.ResourceLockConfig{Identity: "a"})
	const key, counter = "relock_lease:{k}", "redisson_lock_token:{k}"

	s.Do("SET", counter, "abc")
	err := l.Create(ctx, record("a", 0))
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.ErrorContains(t, err, counter)
	assert.NotContains(t, err.Error(), "@user_script", "no raw script error")
	assert.Equal(t, int64(0), mustInt(t, s.Do("EXISTS", key)), "nothing written")
	assert.Equal(t, "abc", mustString(t, s.Do("GET", counter)))
	s.Do("DEL", counter)

	for what, fields := range map[string][]string{
		"a version that is not an integer": {"record", "{}", "version", "x1", "holder", "a", "term", "1"},
		"a term that is not an integer":    {"record", "{}", "version", "1", "holder", "a", "term", "1.5"},
		"a field of another's":             {"record", "{}", "version", "1", "holder", "a", "term", "1", "foreign", "1"},
		"no record":                        {"version", "1"},
		"another's hash alone":             {"foreign", "1"},
	} {
		s.Do("DEL", key)
		s.Do(append([]string{"HSET", key}, fields...)...)
		_, _, err := l.Get(ctx)
		assert.ErrorIs(t, err, reentrant.ErrWrongType, what)
		assert.ErrorContains(t, err, key, what)
		assert.ErrorIs(t, l.Create(ctx, record("a", 0)), reentrant.ErrWrongType, what)
		assert.Equal(t, int64(len(fields)/2), mustInt(t, s.Do("HLEN", key)), what+": nothing written beside it")
	}
	s.Do("DEL", key)

	for _, secs := range []int{0, -1} {
		bad := record("a", 0)
		bad.LeaseDurationSeconds = secs
		assert.ErrorIs(t, l.Create(ctx, bad), reentrant.ErrInvalidArgument)
		assert.ErrorIs(t, l.Update(ctx, bad), reentrant.ErrInvalidArgument)
	}
	assert.Equal(t, int64(0), mustInt(t, s.Do("EXISTS", key)))

	// The election on the same name draws from the same counter: a counter
	// that is not an integer fails Campaign as ErrWrongType, not taken.
	s.Do("SET", counter, "12abc")
	_, _, err = election.New(c, "k", election.Options{}).Campaign(ctx, "a")
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.NotContains(t, err.Error(), "@user_script")
	assert.Equal(t, int64(0), mustInt(t, s.Do("EXISTS", "k")), "the lock was not taken")
}

// TestResourceLockUnreachable: with Redis gone, a call fails with the
// connection's error, not an API error the elector would read as a
// missing record.
func TestResourceLockUnreachable(t *testing.T) {
	s := redistest.Start(t)
	l := newLock(t, s, "gone", "a")
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _, err := l.Get(ctx)
	require.Error(t, err)
	var status apierrors.APIStatus
	assert.False(t, errors.As(err, &status), "not an API error: %v", err)
}

// TestDocumentedACLUser: the Redis user docs/deployment.md gives elections
// runs the resource lock; one with a lock's rights alone is told which
// right it lacks, as ErrNoPermission.
func TestDocumentedACLUser(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	locks, elections := redistest.DocumentedACL(t, "locks"), redistest.DocumentedACL(t, "elections")
	l := kube.NewResourceLock(aclClient(t, s, "elector", append(locks, elections...)...), "acl", resourcelock.ResourceLockConfig{Identity: "a"})
	require.NoError(t, l.Create(ctx, record("a", 0)))
	got, _, err := l.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Update(ctx, record("a", got.LeaderTransitions)))

	short := kube.NewResourceLock(aclClient(t, s, "locksonly", locks...), "acl", resourcelock.ResourceLockConfig{Identity: "b"})
	_, _, err = short.Get(ctx)
	assert.ErrorIs(t, err, reentrant.ErrNoPermission)
	assert.ErrorContains(t, err, "+hmget")
}

// aclClient is a Client of s that connects as a new ACL user with rules.
func aclClient(t *testing.T, s *redistest.Server, user string, rules ...string) *reentrant.Client {
	t.Helper()
	require.NoError(t, s.Do(append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw"}, rules...)...).Error())
	rdb := s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = user, "pw" })
	c, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(); rdb.Close() })
	return c
}

func mustInt(t *testing.T, r rueidis.RedisResult) int64 {
	t.Helper()
	n, err := r.AsInt64()
	require.NoError(t, err)
	return n
}

func mustString(t *testing.T, r rueidis.RedisResult) string {
	t.Helper()
	v, err := r.ToString()
	require.NoError(t, err)
	return v
}

// TestResourceLockFollowsNameMapper: on a Client whose NameMapper prefixes
// names, the record and its terms are at the mapped name's keys, as the
// Client's locks are; the fenced lock of the same name draws past its
// terms.
func TestResourceLockFollowsNameMapper(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	rdb := s.Client()
	c, err := reentrant.New(rdb, reentrant.Options{NameMapper: func(n string) string { return "tenant-7:" + n }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(); rdb.Close() })
	l := kube.NewResourceLock(c, "ctrl", resourcelock.ResourceLockConfig{Identity: "a"})
	require.NoError(t, l.Create(ctx, record("a", 0)))
	assert.Equal(t, int64(1), mustInt(t, s.Do("EXISTS", "relock_lease:{tenant-7:ctrl}")), "the mapped name's record")
	assert.Equal(t, int64(0), mustInt(t, s.Do("EXISTS", "relock_lease:{ctrl}")), "not the bare name's")
	held, err := c.FencedLock("ctrl").Lock(ctx)
	require.NoError(t, err)
	token, _ := reentrant.TokenFrom(held)
	assert.Greater(t, token, int64(l.Term()), "one counter for the lock and the record")
	require.NoError(t, c.FencedLock("ctrl").Unlock(held))
}

// TestResourceLockUpdateOverAnyOtherVersion: an update is a Conflict over
// any version but the one last read, a lower one included: after Redis
// lost its data and another candidate made the record again (its version
// starting over), a writer that never read the new record must not write
// over it.
func TestResourceLockUpdateOverAnyOtherVersion(t *testing.T) {
	s := redistest.Start(t)
	ctx := context.Background()
	a, b := newLock(t, s, "lost", "a"), newLock(t, s, "lost", "b")
	require.NoError(t, a.Create(ctx, record("a", 0)))
	require.NoError(t, a.Update(ctx, record("a", 0)))
	require.NoError(t, a.Update(ctx, record("a", 0))) // a saw version 3

	s.Do("DEL", "relock_lease:{lost}")                // the data lost
	require.NoError(t, b.Create(ctx, record("b", 0))) // version 1, b's
	err := a.Update(ctx, record("a", 0))
	assert.True(t, apierrors.IsConflict(err), "a stale writer over a lower version: %v", err)
	rec, _, err := b.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", rec.HolderIdentity, "b's record stands")

	require.NoError(t, b.Update(ctx, record("b", 0))) // version 2
	c := newLock(t, s, "lost", "c")
	_, _, err = c.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Update(ctx, record("b", 0))) // version 3: c saw 2
	assert.True(t, apierrors.IsConflict(c.Update(ctx, record("c", 0))), "a writer over a higher version")
}
