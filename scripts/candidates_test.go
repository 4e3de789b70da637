package scripts_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/scripts"
)

// TestHandoverLeavesNoStaleCandidate: a leader leaves the roll in the same
// step as its handover or its resign, so the next leader cannot hand the
// lock back to a candidacy that has ended; a candidate that leaves before
// taking the lock handed to it gives it back and wakes the waiters, so
// they need not wait out the handover's window. A later Campaign's entry
// of the same owner stays.
func TestHandoverLeavesNoStaleCandidate(t *testing.T) {
	s := redistest.Start(t)
	rdb := scripts.Conn{Client: s.Client()}
	ctx := context.Background()
	const lock = "handover"
	pub := scripts.PublishClassic
	do := func(cmd ...string) {
		t.Helper()
		require.NoError(t, rdb.Do(ctx, rdb.B().Arbitrary(cmd...).Build()).Error())
	}
	stand := func(owner, reg string) {
		t.Helper()
		key := scripts.CandidateKey(lock, reg)
		do("HSET", key, reg, "1")
		do("PEXPIRE", key, "30000")
		stood, err := scripts.ElectionStand(ctx, rdb, lock, owner, reg, "v", false, pub)
		require.NoError(t, err)
		require.True(t, stood)
	}
	stands := func(owner string) bool {
		n, err := rdb.Do(ctx, rdb.B().Hexists().Key(scripts.CandidatesKey(lock)).Field(owner).Build()).AsInt64()
		require.NoError(t, err)
		return n == 1
	}
	wakes := listen(t, s.Client(), scripts.LockChannel(lock))

	stand("L:1", "L:2")
	stand("S:1", "S:2")
	stand("T:1", "T:2")
	do("HSET", lock, "L:1", "1")
	did, successor, err := scripts.ElectionHandOver(ctx, rdb, lock, "L:1", "L:2", 1, "", 2*time.Second, 30*time.Second, pub)
	require.NoError(t, err)
	require.Equal(t, scripts.HandedOn, did)
	require.Equal(t, "S:1", successor)
	assert.False(t, stands("L:1"), "the leader that handed over stands no more")
	assert.Equal(t, "1", within(t, wakes))

	left, err := scripts.ElectionStand(ctx, rdb, lock, "S:1", "S:2", "", true, pub)
	require.NoError(t, err)
	require.True(t, left)
	n, err := rdb.Do(ctx, rdb.B().Exists().Key(lock).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the successor left without taking the lock: it is free")
	assert.Equal(t, "0", within(t, wakes), "the waiters are woken when the lock handed over is given back")

	_, err = scripts.ElectionResign(ctx, rdb, lock, "T:1", "T:2", 2, pub)
	require.NoError(t, err)
	assert.False(t, stands("T:1"), "a leader that resigns stands no more, whatever the record says")

	stand("U:1", "U:3")
	_, err = scripts.ElectionResign(ctx, rdb, lock, "U:1", "U:2", 3, pub)
	require.NoError(t, err)
	assert.True(t, stands("U:1"), "a later Campaign's entry stays")
}

// within returns the next message of got, failing after 5s.
func within(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5s")
		return ""
	}
}
