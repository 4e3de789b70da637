package reentrant_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/reentrant"
)

// AcquireN takes n permits together or none, each with its own id and
// context; a waiter for n is woken when n are back. TryRelease says "not
// taken" as false; LeaseTime reads what is left of a lease.
func TestPermitsAtOnce(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, quiet)
	s := c.PermitExpirableSemaphore("many")
	require.NoError(t, s.SetPermits(bg(), 3))
	counts := func() [2]int64 {
		t.Helper()
		available, taken, err := s.Permits(bg())
		require.NoError(t, err)
		return [2]int64{available, taken}
	}

	_, ok, err := s.TryAcquireN(bg(), 4)
	require.NoError(t, err)
	assert.False(t, ok, "4 of 3")
	assert.Equal(t, [2]int64{3, 0}, counts(), "none taken")

	two, err := s.AcquireN(bg(), 2, reentrant.LeaseFor(time.Hour))
	require.NoError(t, err)
	require.Len(t, two, 2)
	assert.NotEqual(t, two[0].ID(), two[1].ID())
	for _, p := range two {
		assert.Regexp(t, permitID, p.ID())
		left, err := s.LeaseTime(bg(), p.ID())
		require.NoError(t, err)
		assert.True(t, left > 59*time.Minute && left <= time.Hour, "lease left %v", left)
	}
	assert.Equal(t, [2]int64{1, 2}, counts())
	_, ok, err = s.TryAcquireN(bg(), 2)
	require.NoError(t, err)
	assert.False(t, ok, "2 of 1")

	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	var got []*reentrant.Permit
	waiter := async(func() (err error) {
		got, err = s.AcquireN(ctx, 2)
		return err
	})
	e.subscribed(t, "redisson_sc:{many}", 1)
	released, err := s.TryRelease(bg(), two[0].ID())
	require.NoError(t, err)
	assert.True(t, released)
	within(t, waiter, 10*time.Second, "a waiter for 2 woken when 2 are back")
	require.Len(t, got, 2)
	assert.ErrorIs(t, context.Cause(two[0].Context()), context.Canceled, "released")
	assert.NoError(t, two[1].Context().Err(), "each permit its own context")

	left, err := s.LeaseTime(bg(), got[0].ID())
	require.NoError(t, err)
	assert.True(t, left > 0 && left <= 30*time.Second, "kept by the watchdog: %v", left)

	released, err = s.TryRelease(bg(), two[0].ID())
	require.NoError(t, err)
	assert.False(t, released, "not taken any more")
	_, err = s.LeaseTime(bg(), two[0].ID())
	assert.ErrorIs(t, err, reentrant.ErrNotHeld)
	_, err = s.LeaseTime(bg(), "xyz")
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	_, err = s.AcquireN(bg(), 0)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	_, _, err = s.TryAcquireN(bg(), -1)
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)

	released, err = s.TryRelease(bg(), got[0].ID(), got[1].ID(), two[1].ID())
	require.NoError(t, err)
	assert.True(t, released)
	assert.Equal(t, [2]int64{3, 0}, counts())
}

// Java's getLeaseTime reads a Go permit's lease, and Go's LeaseTime a Java
// permit's, the one Java took without a lease included.
func TestPermitLeaseTimeAcrossClients(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	java := redissontest.New(e.rdb(t))
	s := c.PermitExpirableSemaphore("lt")
	require.NoError(t, s.SetPermits(bg(), 3))

	leased, err := s.Acquire(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	left, err := java.PermitLeaseTime(bg(), "lt", leased.ID())
	require.NoError(t, err)
	assert.True(t, left > 55000 && left <= 60000, "Java reads %d ms", left)

	forever, err := java.PermitAcquire(bg(), "lt", 0)
	require.NoError(t, err)
	d, err := s.LeaseTime(bg(), forever)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), d, "Java's permit without a lease")

	javaLeased, err := java.PermitAcquire(bg(), "lt", 10*time.Second)
	require.NoError(t, err)
	d, err = s.LeaseTime(bg(), javaLeased)
	require.NoError(t, err)
	assert.True(t, d > 5*time.Second && d <= 10*time.Second, "Go reads %v", d)

	_, err = java.PermitLeaseTime(bg(), "lt", "00000000000000000000000000000000")
	assert.Error(t, err, "Java throws on an id not taken")
}

// A lease a Java client gives a permit this client holds
// (updateLeaseTime) stands: the watchdog stops renewing the permit rather
// than write over it, and the permit's Context ends with that lease, or a
// renewal's span after the watchdog saw it, whichever is first.
func TestPermitJavaLeaseStands(t *testing.T) {
	e := onRedis(t)
	rounds := make(chan struct{}, 100)
	c := e.client(t, reentrant.Options{WatchdogTimeout: 600 * time.Millisecond, Hooks: reentrant.Hooks{
		Renewed: func(reentrant.Renewal) {
			select {
			case rounds <- struct{}{}:
			default:
			}
		},
	}})
	java := redissontest.New(e.rdb(t))
	s := c.PermitExpirableSemaphore("js")
	require.NoError(t, s.SetPermits(bg(), 2))
	score := func(p *reentrant.Permit) string {
		t.Helper()
		raw, _ := hex.DecodeString(p.ID())
		v, err := e.do(t, "ZSCORE", "{js}:timeout", string(raw)).ToString()
		require.NoError(t, err)
		return v
	}
	awaitRounds := func(n int) {
		t.Helper()
		for len(rounds) > 0 {
			<-rounds
		}
		for range n {
			select {
			case <-rounds:
			case <-time.After(10 * time.Second):
				t.Fatal("no renewal round")
			}
		}
	}

	long, err := s.Acquire(bg())
	require.NoError(t, err)
	first := score(long)
	awaitRounds(3)
	assert.NotEqual(t, first, score(long), "renewed by the watchdog")
	assert.NoError(t, long.Context().Err(), "each renewal knows the lease end the last one wrote")
	updated, err := java.PermitUpdateLease(bg(), "js", long.ID(), time.Hour)
	require.NoError(t, err)
	require.True(t, updated)
	javas := score(long)
	select {
	case <-long.Context().Done():
		assert.ErrorIs(t, context.Cause(long.Context()), reentrant.ErrLeaseEnded)
		assert.NotErrorIs(t, context.Cause(long.Context()), reentrant.ErrLockLost)
	case <-time.After(10 * time.Second):
		t.Fatal("the permit's context outlived a renewal's span after the watchdog let it go")
	}
	assert.Equal(t, javas, score(long), "Java's lease stands: not written over by a renewal, and the permit still taken")

	short, err := s.Acquire(bg())
	require.NoError(t, err)
	updated, err = java.PermitUpdateLease(bg(), "js", short.ID(), 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, updated)
	select {
	case <-short.Context().Done():
		assert.ErrorIs(t, context.Cause(short.Context()), reentrant.ErrLeaseEnded)
	case <-time.After(10 * time.Second):
		t.Fatal("the permit's context outlived Java's short lease")
	}
	eventually(t, "the short-leased permit back", func() bool {
		available, taken, err := s.Permits(bg())
		return err == nil && available == 1 && taken == 1
	})
}

// A permit whose lease a Java client set (updateLeaseTime: 60 s, 1.5 s, or
// no lease) is no longer kept by this client, and its Context ends; its
// holder's Release still gives it back by id, so it never stays taken
// until Java's lease ends (with no lease, for good).
func TestPermitReleasedAfterJavaSetItsLease(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{WatchdogTimeout: 600 * time.Millisecond})
	java := redissontest.New(e.rdb(t))
	for _, lease := range []time.Duration{time.Minute, 1500 * time.Millisecond, -1} {
		t.Run(fmt.Sprintf("lease %v", lease), func(t *testing.T) {
			name := fmt.Sprintf("javalease%d", lease)
			s := c.PermitExpirableSemaphore(name)
			require.NoError(t, s.SetPermits(bg(), 2))
			p, err := s.Acquire(bg())
			require.NoError(t, err)
			updated, err := java.PermitUpdateLease(bg(), name, p.ID(), lease)
			require.NoError(t, err)
			require.True(t, updated)
			set := time.Now()
			select {
			case <-p.Context().Done():
				require.ErrorIs(t, context.Cause(p.Context()), reentrant.ErrLeaseEnded)
			case <-time.After(10 * time.Second):
				t.Fatal("the permit's context outlived the watchdog's letting it go")
			}
			err = p.Release(bg())
			if lease > 0 && time.Since(set) >= lease {
				// Java's short lease ran out first, on a slow machine:
				// the permit went back by itself, and Release says so.
				assert.ErrorIs(t, err, reentrant.ErrNotHeld)
			} else {
				assert.NoError(t, err, "given back by its holder")
			}
			available, taken, err := s.Permits(bg())
			require.NoError(t, err)
			assert.Equal(t, [2]int64{2, 0}, [2]int64{available, taken}, "the permit is back in the count")
			assert.ErrorIs(t, p.Release(bg()), reentrant.ErrNotHeld, "a second Release finds it gone")
		})
	}
}
