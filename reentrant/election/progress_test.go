package election_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// A leader that stops reporting progress stops leading within
// ProgressWithin and a round trip: the candidate waiting behind it leads,
// with a later term, and the stalled leader's context and Lost hook say
// ErrStalled. One that reports, or whose health check passes, leads on.
func TestStalledLeaderIsSucceeded(t *testing.T) {
	s := start(t)
	const within = 300 * time.Millisecond
	var lostWith atomic.Value
	a := election.New(newNode(t, s, 0).c, "stalling", election.Options{ProgressWithin: within,
		Hooks: election.Hooks{Lost: func(_ string, _ election.Term, cause error) { lostWith.Store(cause) }}})
	b := election.New(newNode(t, s, 0).c, "stalling", election.Options{})
	ctx := context.Background()

	leading, termA, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	start := time.Now()
	for range 5 { // five deadlines' worth of reports: still leading
		time.Sleep(within / 3)
		require.True(t, reentrant.Progress(leading))
	}
	require.NoError(t, leading.Err(), "a leader that reports leads on")

	last := time.Now()
	next := campaignAsync(ctx, b, "b")
	r := redistest.Recv(t, next)
	require.NoError(t, r.err)
	after := time.Since(last)
	assert.GreaterOrEqual(t, after, within-10*time.Millisecond, "b led before a's deadline passed")
	assert.Less(t, after, within+time.Second, "b led later than a's deadline and a round trip")
	assert.Greater(t, r.term, termA)
	assert.Greater(t, time.Since(start), 5*within/3)

	<-leading.Done()
	assert.ErrorIs(t, context.Cause(leading), reentrant.ErrStalled)
	assert.Eventually(t, func() bool { return lostWith.Load() != nil }, 3*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, lostWith.Load().(error), reentrant.ErrStalled)
	require.NoError(t, b.Resign(r.held))
}

// A health check stands for reports: a leader whose check passes leads
// through many deadlines, and one whose check starts failing stops
// leading within the deadline; a candidate whose check fails does not
// campaign.
func TestHealthCheckedLeader(t *testing.T) {
	s := start(t)
	const within = 300 * time.Millisecond
	var sick atomic.Bool
	errSick := errors.New("sick")
	healthy := func(context.Context) error {
		if sick.Load() {
			return errSick
		}
		return nil
	}
	n := newNode(t, s, 0)
	a := election.New(n.c, "checked", election.Options{ProgressWithin: within, Healthy: healthy})
	leading, _, err := a.Campaign(context.Background(), "a")
	require.NoError(t, err)
	time.Sleep(5 * within) // five deadlines with no report but the checks
	require.NoError(t, leading.Err(), "passing checks keep a leader leading")

	sick.Store(true)
	from := time.Now()
	<-leading.Done()
	assert.Less(t, time.Since(from), within+time.Second)
	assert.ErrorIs(t, context.Cause(leading), reentrant.ErrStalled)

	_, _, err = a.Campaign(context.Background(), "a")
	assert.ErrorIs(t, err, errSick, "a sick candidate does not campaign")
	held, ok, err := n.c.FencedLock("checked").TryLock(context.Background(), reentrant.WaitAtMost(2*time.Second))
	require.NoError(t, err)
	require.True(t, ok, "the lock was given back, and the sick candidate did not take it")
	require.NoError(t, n.c.FencedLock("checked").Unlock(held))
}

// A leader that stalls is seen to stop leading by an observer on another
// Client within its deadline and a round trip, not when its hold's TTL
// (the default 30 s watchdog here) would have run out: the give-back is
// announced as a Resign is.
func TestObserversSeeAStall(t *testing.T) {
	s := start(t)
	const within = 200 * time.Millisecond
	a := election.New(newNode(t, s, 0).c, "observed-stall", election.Options{ProgressWithin: within})
	watcher := election.New(newNode(t, s, 0).c, "observed-stall", election.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watcher.Observe(ctx)
	require.Empty(t, redistest.Recv(t, seen).Owner, "nobody leads yet")

	leading, term, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	first := redistest.Recv(t, seen)
	require.NoError(t, first.Err)
	require.Equal(t, term, first.Term, "the observer sees a lead")

	<-leading.Done()
	stalled := time.Now()
	require.ErrorIs(t, context.Cause(leading), reentrant.ErrStalled)
	next := redistest.Recv(t, seen)
	require.NoError(t, next.Err)
	assert.Empty(t, next.Owner, "the observer sees nobody lead")
	assert.Less(t, time.Since(stalled), 2*time.Second, "seen at once, not at the TTL (30 s)")
	t.Logf("an observer on another Client saw nobody lead %v after the stall", time.Since(stalled).Round(100*time.Microsecond))
	_, err = watcher.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
}

// Run treats a stall as a loss: fn's leading context ends with
// ErrStalled, and Run campaigns again rather than returning the failed
// Resign, and returns ctx's error once ctx ends; a Resign of a stalled
// leadership says it stalled, with "relock: " once and no "unlock".
func TestRunCampaignsAgainAfterAStall(t *testing.T) {
	s := start(t)
	e := election.New(newNode(t, s, 0).c, "run-stall", election.Options{ProgressWithin: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs []error
	err := e.Run(ctx, "a", func(leading context.Context, _ election.Term) error {
		<-leading.Done()
		runs = append(runs, context.Cause(leading))
		if len(runs) == 2 {
			cancel()
		}
		return leading.Err()
	})
	require.Len(t, runs, 2, "a stalled leader campaigns again")
	for _, cause := range runs {
		assert.ErrorIs(t, cause, reentrant.ErrStalled)
	}
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotContains(t, err.Error(), "unlock")

	// Resign of a stalled leadership says it stalled, without "unlock".
	leading, _, err := e.Campaign(context.Background(), "a")
	require.NoError(t, err)
	<-leading.Done()
	err = e.Resign(leading)
	assert.ErrorIs(t, err, reentrant.ErrStalled)
	assert.NotContains(t, err.Error(), "unlock")
	assert.Equal(t, 1, strings.Count(err.Error(), "relock:"), err.Error())
}

// Healthy without ProgressWithin has no period to run at: the Election
// refuses every call, and writes nothing.
func TestHealthyNeedsProgressWithin(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	e := election.New(n.c, "healthy-alone", election.Options{Healthy: func(context.Context) error { return errors.New("sick") }})
	_, _, err := e.Campaign(context.Background(), "a")
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "ProgressWithin")
	_, err = e.Leader(context.Background())
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	keys, err := n.rdb.Do(context.Background(), n.rdb.B().Keys().Pattern("*").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// A Healthy that panics while leading, and a Lost hook that panics, are
// recovered on relock's goroutines: the process lives, the panic is
// logged with its stack, and the leader gives leadership up within its
// deadline, its check counted as failed.
func TestPanickingHealthyGivesUp(t *testing.T) {
	s := start(t)
	var logs lockedBuffer
	rdb := s.Client()
	c, err := reentrant.New(rdb, reentrant.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	const within = 300 * time.Millisecond
	var checks atomic.Int32
	e := election.New(c, "panicky", election.Options{ProgressWithin: within,
		Healthy: func(context.Context) error {
			if checks.Add(1) > 1 { // the candidate's check passes; the leader's panic
				panic("a bug in the health check")
			}
			return nil
		},
		Hooks: election.Hooks{Lost: func(string, election.Term, error) { panic("a bug in the Lost hook") }},
	})
	leading, _, err := e.Campaign(context.Background(), "a")
	require.NoError(t, err)
	from := time.Now()
	<-leading.Done()
	assert.ErrorIs(t, context.Cause(leading), reentrant.ErrStalled, "a panicking check counts as failed")
	assert.Less(t, time.Since(from), within+time.Second)
	redistest.Eventually(t, 10*time.Second, "both panics logged", func() bool {
		out := logs.String()
		return strings.Contains(out, "a bug in the health check") && strings.Contains(out, "a bug in the Lost hook")
	})
	assert.Contains(t, logs.String(), "stack=")
	assert.Equal(t, int32(2), checks.Load(), "no check after the one that panicked")
}

// lockedBuffer is a bytes.Buffer for a logger that writes from several
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
