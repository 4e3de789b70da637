package election_test

import (
	"context"
	"errors"
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
