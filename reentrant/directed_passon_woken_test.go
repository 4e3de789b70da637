package reentrant_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// attemptCounter counts the scripts sent on one key.
type attemptCounter struct {
	rueidis.Client
	key string
	n   atomic.Int32
}

func (a *attemptCounter) count(cmds ...rueidis.Completed) {
	for _, c := range cmds {
		if args := c.Commands(); len(args) > 3 && (args[0] == "EVALSHA" || args[0] == "EVAL") && args[3] == a.key {
			a.n.Add(1)
		}
	}
}

func (a *attemptCounter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	a.count(cmd)
	return a.Client.Do(ctx, cmd)
}

func (a *attemptCounter) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	a.count(cmds...)
	return a.Client.DoMulti(ctx, cmds...)
}

type cancelKey struct{}

var errGaveUp = errors.New("the caller gave up as it was woken")

// A waiter woken by a release that gives up at that moment hands the
// wake-up to the next waiter of its client, which takes the lock at once
// rather than at its next re-poll (a minute here). Two waiters of one
// client wait for a semaphore's only permit (a release of one permit wakes
// one waiter, as Redisson's SemaphorePubSub does); the one it wakes has its
// ctx ended by the Woken hook.
func TestWokenWaiterThatGivesUpPassesOn(t *testing.T) {
	e := onRedis(t)
	counter := &attemptCounter{Client: e.rdb(t), key: "woken"}
	var gaveUp atomic.Bool
	c, err := reentrant.New(counter, reentrant.Options{
		RepollInterval: time.Minute,
		Hooks: reentrant.Hooks{Woken: func(ctx context.Context, _ reentrant.Kind, _ string) {
			if cancel, ok := ctx.Value(cancelKey{}).(context.CancelCauseFunc); ok && gaveUp.CompareAndSwap(false, true) {
				cancel(errGaveUp)
			}
		}},
	})
	require.NoError(t, err)
	defer c.Close()
	s := c.Semaphore("woken")
	set, err := s.TrySetPermits(bg(), 1)
	require.NoError(t, err)
	require.True(t, set)
	require.NoError(t, e.client(t).Semaphore("woken").Acquire(bg(), 1)) // another process has it
	counter.n.Store(0)

	results := make(chan error, 2)
	for range 2 {
		ctx, cancel := context.WithCancelCause(bg())
		defer cancel(nil)
		ctx = context.WithValue(ctx, cancelKey{}, cancel)
		go func() {
			err := s.Acquire(ctx, 1, reentrant.WaitAtMost(20*time.Second))
			if err == nil {
				err = s.Release(bg(), 1)
			}
			results <- err
		}()
	}
	// Each waiter tries, subscribes, and tries again before it sleeps.
	eventually(t, "both waiters to wait", func() bool { return counter.n.Load() >= 4 })
	released := time.Now()
	require.NoError(t, e.client(t).Semaphore("woken").Release(bg(), 1))

	var got []error
	for range 2 {
		select {
		case err := <-results:
			got = append(got, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("a waiter still waits 10s after the release (got %v): the wake-up was lost", got)
		}
	}
	took := time.Since(released)
	require.True(t, gaveUp.Load(), "a waiter was woken")
	gaveUps, oks := 0, 0
	for _, err := range got {
		switch {
		case err == nil:
			oks++
		case errors.Is(err, errGaveUp):
			gaveUps++
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	assert.Equal(t, 1, gaveUps, "the woken waiter gave up")
	assert.Equal(t, 1, oks, "the other took the permit")
	t.Logf("the other waiter had the permit %v after the release", took)
}
