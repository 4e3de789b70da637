package reentrant_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// TestRenewalLateWarnsBeforeTheLoss: 100 clients each hold a lock when
// Redis stops answering writes (CLIENT PAUSE WRITE): each is told its
// renewals are late, once, at least a third of WatchdogTimeout before its
// held context ends with ErrLockLost, in 99 runs of 100 at least (the
// promise: 0.4 of it, from the same loop). The warning names the hold,
// with the deadline the loss then comes at.
func TestRenewalLateWarnsBeforeTheLoss(t *testing.T) {
	const (
		holders = 100
		wd      = 3 * time.Second
	)
	s := redistest.Start(t)
	type seen struct {
		late      []time.Time
		warned    reentrant.LateRenewal
		lost      time.Time
		heldUntil context.Context
	}
	var mu sync.Mutex
	runs := make([]*seen, holders)
	for i := range runs {
		r := &seen{}
		runs[i] = r
		c, err := reentrant.New(s.Client(), reentrant.Options{WatchdogTimeout: wd, Hooks: reentrant.Hooks{
			RenewalLate: func(_ context.Context, l reentrant.LateRenewal) {
				mu.Lock()
				defer mu.Unlock()
				r.late, r.warned = append(r.late, time.Now()), l
			},
			// Told from the watchdog's loop as the loss is found, before
			// the held context is cancelled.
			HoldEnded: func(context.Context, reentrant.HoldEnd) {
				mu.Lock()
				defer mu.Unlock()
				r.lost = time.Now()
			},
		}})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		held, err := c.Lock(fmt.Sprintf("late:%d", i)).Lock(context.Background())
		require.NoError(t, err)
		r.heldUntil = held
	}
	require.NoError(t, s.Do("CLIENT", "PAUSE", "60000", "WRITE").Error())
	t.Cleanup(func() { s.Do("CLIENT", "UNPAUSE") })
	for _, r := range runs {
		select {
		case <-r.heldUntil.Done():
		case <-time.After(2 * wd):
			t.Fatal("a hold was not lost within two watchdog timeouts of the pause")
		}
		require.ErrorIs(t, context.Cause(r.heldUntil), reentrant.ErrUnconfirmed)
	}
	mu.Lock()
	defer mu.Unlock()
	ahead, least := 0, time.Duration(1<<62)
	for i, r := range runs {
		require.Len(t, r.late, 1, "holder %d: told once", i)
		assert.Equal(t, fmt.Sprintf("late:%d", i), r.warned.Name)
		assert.Equal(t, reentrant.KindLock, r.warned.Kind)
		assert.WithinDuration(t, r.warned.Deadline, r.lost, wd/3, "holder %d: lost at the deadline it was told", i)
		lead := r.lost.Sub(r.late[0])
		least = min(least, lead)
		if lead >= wd/3 {
			ahead++
		}
	}
	t.Logf("told at least %v before the loss (WatchdogTimeout %v); %d of %d at least a third of it ahead", least, wd, ahead, holders)
	assert.GreaterOrEqual(t, ahead, 99, "told a third of WatchdogTimeout ahead")
}

// TestRenewalLag: the Renewed hook says how late each round was confirmed
// against its schedule, a third of the TTL after the last round confirmed
// whole: 0 for the first round, and, after Redis held the renewals up for
// 1.5s, at least the 0.5s by which that outlasted the round due a second
// after the last (the test's own delays would have to pass a second to
// change that).
func TestRenewalLag(t *testing.T) {
	const wd = 3 * time.Second
	s := redistest.Start(t)
	rounds := make(chan reentrant.Renewal, 64)
	c, err := reentrant.New(s.Client(), reentrant.Options{WatchdogTimeout: wd, Hooks: reentrant.Hooks{
		Renewed: func(r reentrant.Renewal) {
			select {
			case rounds <- r:
			default:
			}
		},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	held, err := c.Lock("lag").Lock(context.Background())
	require.NoError(t, err)
	next := func() reentrant.Renewal {
		t.Helper()
		select {
		case r := <-rounds:
			require.Equal(t, wd, r.TTL)
			return r
		case <-time.After(5 * wd):
			t.Fatal("no renewal round")
			return reentrant.Renewal{}
		}
	}
	first := next()
	require.NoError(t, first.Err)
	assert.Zero(t, first.Lag, "the first round has no schedule to be late against")
	require.NoError(t, next().Err) // a round confirmed just before the pause
	require.NoError(t, s.Do("CLIENT", "PAUSE", "1500", "WRITE").Error())
	var late reentrant.Renewal
	for late = next(); late.Err != nil; late = next() {
	}
	assert.GreaterOrEqual(t, late.Lag, 300*time.Millisecond, "the round held up by the pause")
	require.NoError(t, held.Err(), "not lost")
	require.NoError(t, c.Lock("lag").Unlock(held))
}
