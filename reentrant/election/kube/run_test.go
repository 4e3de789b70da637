package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// newElection returns the election name on a Client of s of its own,
// with watchdog timeout wd.
func newElection(t *testing.T, s *redistest.Server, name string, wd time.Duration) *election.Election {
	t.Helper()
	rdb := s.Client()
	c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: wd})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(); rdb.Close() })
	return election.New(c, name, election.Options{})
}

// TestRunReturnsOnLoss: leadership lost under fn (its lock deleted, so
// the watchdog's renewal finds it gone) cancels the leading context with
// reentrant.ErrLockLost, and Run returns ErrLeadershipLost once fn has
// returned, within the watchdog's renewal period of the loss; it does not
// campaign again. With Recampaign it does, and leads again.
func TestRunReturnsOnLoss(t *testing.T) {
	s := redistest.Start(t)
	const wd = time.Second // renewed every third of it
	for _, recampaign := range []bool{false, true} {
		e := newElection(t, s, "loss", wd)
		ctx, cancel := context.WithCancel(context.Background())
		terms := make(chan election.Term, 4)
		ended := make(chan error, 1)
		go func() {
			ended <- kube.Run(ctx, e, "a", func(leading context.Context, term election.Term) error {
				terms <- term
				<-leading.Done()
				return errors.New("fn's own error")
			}, kube.RunOptions{Recampaign: recampaign})
		}()
		first := <-terms
		start := time.Now()
		s.Do("DEL", "loss")
		if !recampaign {
			err := <-ended
			took := time.Since(start)
			require.ErrorIs(t, err, kube.ErrLeadershipLost)
			require.ErrorIs(t, err, reentrant.ErrLockLost)
			assert.ErrorContains(t, err, "fn's own error")
			assert.Less(t, took, wd+time.Second, "Run returned within a renewal period of the loss, and slack")
			cancel()
			continue
		}
		select {
		case second := <-terms:
			assert.Greater(t, second, first, "led again, with a new term")
		case err := <-ended:
			t.Fatalf("Run returned with Recampaign: %v", err)
		case <-time.After(wd + 2*time.Second):
			t.Fatal("no second leadership with Recampaign")
		}
		cancel()
		require.ErrorIs(t, <-ended, context.Canceled)
	}
}

// TestRunResignsWhenFnReturns: fn returning while leading resigns, and a
// waiting candidate leads well within a second (not after a lease).
func TestRunResignsWhenFnReturns(t *testing.T) {
	s := redistest.Start(t)
	a, b := newElection(t, s, "resign", 0), newElection(t, s, "resign", 0)
	release := make(chan struct{})
	led := make(chan struct{})
	ranA := make(chan error, 1)
	go func() {
		ranA <- kube.Run(context.Background(), a, "a", func(context.Context, election.Term) error {
			close(led)
			<-release
			return nil
		}, kube.RunOptions{})
	}()
	<-led
	next := make(chan time.Time, 1)
	ranB := make(chan error, 1)
	go func() {
		ranB <- kube.Run(context.Background(), b, "b", func(context.Context, election.Term) error {
			next <- time.Now()
			return nil
		}, kube.RunOptions{})
	}()
	time.Sleep(50 * time.Millisecond) // b waits
	start := time.Now()
	close(release)
	require.NoError(t, <-ranA)
	took := (<-next).Sub(start)
	require.NoError(t, <-ranB)
	assert.Less(t, took, 2*time.Second, "the next candidate led at the resign, not after the 30 s watchdog timeout")
	t.Logf("handed over in %v", took)
}

func TestRunBadInput(t *testing.T) {
	s := redistest.Start(t)
	e := newElection(t, s, "bad", 0)
	assert.ErrorIs(t, kube.Run(context.Background(), e, "a", nil, kube.RunOptions{}), reentrant.ErrInvalidArgument)
	err := kube.Run(context.Background(), election.New(nil, "x", election.Options{}), "a",
		func(context.Context, election.Term) error { return nil }, kube.RunOptions{})
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}

// TestRunNilContext: a nil ctx is ErrInvalidArgument, not a panic.
func TestRunNilContext(t *testing.T) {
	s := redistest.Start(t)
	e := newElection(t, s, "nilctx", 0)
	//lint:ignore SA1012 a nil context is the point
	err := kube.Run(nil, e, "a", func(context.Context, election.Term) error { return nil }, kube.RunOptions{}) //nolint:staticcheck
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}

// TestRunAfterAStall: a leader that stalls past ProgressWithin has lost
// leadership: Run returns ErrLeadershipLost (with ErrStalled) once fn has
// returned, saying "relock: " once and no "unlock"; with Recampaign it
// campaigns again and leads with a new term.
func TestRunAfterAStall(t *testing.T) {
	s := redistest.Start(t)
	for _, recampaign := range []bool{false, true} {
		rdb := s.Client()
		c, err := reentrant.New(rdb, reentrant.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); rdb.Close() })
		e := election.New(c, "stall", election.Options{ProgressWithin: 100 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		terms := make(chan election.Term, 4)
		ended := make(chan error, 1)
		go func() {
			ended <- kube.Run(ctx, e, "a", func(leading context.Context, term election.Term) error {
				terms <- term
				<-leading.Done() // never reports progress: stalls
				return leading.Err()
			}, kube.RunOptions{Recampaign: recampaign})
		}()
		first := redistest.Recv(t, terms)
		if !recampaign {
			err := redistest.Recv(t, ended)
			require.ErrorIs(t, err, kube.ErrLeadershipLost)
			require.ErrorIs(t, err, reentrant.ErrStalled)
			assert.NotContains(t, err.Error(), "unlock")
			assert.Equal(t, 1, strings.Count(strings.Split(err.Error(), "\n")[0], "relock:"), err.Error())
			cancel()
			continue
		}
		second := redistest.Recv(t, terms)
		assert.Greater(t, second, first, "led again after the stall, with a new term")
		cancel()
		require.ErrorIs(t, redistest.Recv(t, ended), context.Canceled)
	}
}
