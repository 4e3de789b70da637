package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// TestLeaderMustHoldTheLock: a leader force-unlocked (its record still
// names it) is not reported: Leader says nobody leads at once, not once
// someone else proclaims.
func TestLeaderMustHoldTheLock(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	e := n.election("forced")
	ctx := context.Background()
	leading, _, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	_, err = newNode(t, s, 0).c.FencedLock("forced").ForceUnlock(ctx)
	require.NoError(t, err)
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader, "the record names an owner that holds nothing")
	_ = e.Resign(leading)
}

// TestStaleResignLeavesTheSuccessor: a leader that lost its lock, and a
// successor that leads in a newer term; the stale leader's late Resign
// (Run always resigns) says it had lost, and leaves the successor's
// record: the successor is still the leader.
func TestStaleResignLeavesTheSuccessor(t *testing.T) {
	s := start(t)
	a, b := newNode(t, s, 0).election("succession"), newNode(t, s, 0).election("succession")
	ctx := context.Background()
	leadingA, _, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, s.Do("DEL", "succession").Error()) // a's hold gone; its watchdog has not noticed
	leadingB, termB, err := b.Campaign(ctx, "b")
	require.NoError(t, err)
	assert.ErrorIs(t, a.Resign(leadingA), reentrant.ErrLockLost)
	l, err := b.Leader(ctx)
	require.NoError(t, err, "the successor still leads")
	assert.Equal(t, termB, l.Term)
	assert.Equal(t, "b", l.Value)
	require.NoError(t, b.Resign(leadingB))
}

// TestObserverSubscribesAgain: an observer whose connection is killed
// subscribes again at once: a change after the kill is seen within a
// second or two, not at the 10 s re-read.
func TestObserverSubscribesAgain(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	e := n.election("resub")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := e.Observe(ctx)
	require.Equal(t, "", redistest.Recv(t, seen).Owner)
	for round := 0; round < 3; round++ {
		require.NoError(t, s.Do("CLIENT", "KILL", "TYPE", "pubsub").Error())
		leading, term, err := e.Campaign(ctx, "a")
		require.NoError(t, err)
		o := recvWithin(t, seen, 3*time.Second)
		require.NoError(t, o.Err)
		assert.Equal(t, term, o.Term, "round %d", round)
		require.NoError(t, e.Resign(leading))
		assert.Equal(t, "", recvWithin(t, seen, 3*time.Second).Owner)
	}
}

// TestObserverDropsADeadLeaderByItsLease: a leader whose process can no
// longer reach Redis announces nothing; with nobody else campaigning, an
// observer shows nobody once the dead leader's hold expires (a 1 s
// watchdog here), not at the 10 s re-read: within the lease and a
// second's slack of the leader's last renewal.
func TestObserverDropsADeadLeaderByItsLease(t *testing.T) {
	s := start(t)
	cut := newNode(t, s, time.Second)
	e := cut.election("dies")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading, term, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	seen := newNode(t, s, 0).election("dies").Observe(ctx)
	require.Equal(t, term, redistest.Recv(t, seen).Term)
	cut.rdb.Close() // no renewal from now on; the hold has at most 1 s left
	died := time.Now()
	o := recvWithin(t, seen, 3*time.Second)
	require.NoError(t, o.Err)
	assert.Equal(t, "", o.Owner, "nobody leads once the hold expired")
	t.Logf("the observer dropped the dead leader %v after its process was cut off (lease 1 s)", time.Since(died).Round(time.Millisecond))
	<-leading.Done()
}
