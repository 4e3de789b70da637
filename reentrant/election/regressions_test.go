package election_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// Bugs that etcd's concurrency package shipped, each pinned here by a
// test of relock's elections (docs/safety.md lists them).

// etcd #21128: a Campaign that failed (a compacted revision while it
// waited) left its candidacy key in etcd, so the election stayed blocked
// behind a candidate that had given up. Here a Campaign that gives up
// while it waits, and one that fails after it took the lock (its record
// cannot be written), leave nothing behind: the next candidate leads at
// once after the leader resigns, and the lock is free after the failure.
func TestFailedCampaignLeavesNothing(t *testing.T) {
	s := start(t)
	leader, waiter, next := newNode(t, s, 0), newNode(t, s, 0), newNode(t, s, 0)
	ctx := context.Background()
	leading, _, err := leader.election("blocked").Campaign(ctx, "leader")
	require.NoError(t, err)
	gaveUp, cancel := context.WithCancel(ctx)
	waiting := campaignAsync(gaveUp, waiter.election("blocked"), "gave up")
	redistest.Eventually(t, 10*time.Second, "the waiter to wait", func() bool {
		chans, _ := s.Do("PUBSUB", "CHANNELS", "*{blocked}*").AsStrSlice()
		return len(chans) > 0
	})
	cancel()
	assert.ErrorIs(t, redistest.Recv(t, waiting).err, context.Canceled)
	nextLed := campaignAsync(ctx, next.election("blocked"), "next")
	require.NoError(t, leader.election("blocked").Resign(leading))
	got := redistest.Recv(t, nextLed)
	require.NoError(t, got.err, "the next candidate leads, not blocked by the one that gave up")
	l, err := next.election("blocked").Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "next", l.Value)
	require.NoError(t, next.election("blocked").Resign(got.held))

	// A record that is not an election's: Campaign fails after it took
	// the lock, and gives the lock back.
	require.NoError(t, s.Do("SET", "relock_election:{broken}", "not a record").Error())
	_, _, err = waiter.election("broken").Campaign(ctx, "x")
	require.Error(t, err)
	_, ok, err := next.c.FencedLock("broken").TryLock(ctx)
	require.NoError(t, err)
	assert.True(t, ok, "the failed Campaign gave the lock back")
}

// failNext makes the next writes that contain marker fail before they
// reach Redis: the connection closes instead, as a network that drops it
// would.
type failNext struct {
	net.Conn
	marker []byte
	left   *atomic.Int32
}

func (c failNext) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.marker) && c.left.Add(-1) >= 0 {
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// etcd #22123: Resign forgot its leadership when its request failed: the
// leader key stayed in etcd while the Election believed it had resigned,
// so a retry did nothing and the election stayed blocked until the
// session expired. Here Resign's release fails on the wire once (the
// connection drops before the command reaches Redis): Resign sends it
// again, returns nil, and the lock is free, so the next candidate leads at
// once; a second Resign says ErrNotLeader, leadership having ended.
func TestFailedResignIsNotForgotten(t *testing.T) {
	s := start(t)
	left := new(atomic.Int32)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true,
		DialCtxFn: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			conn, err := d.DialContext(ctx, "tcp", addr)
			return failNext{Conn: conn, marker: []byte("redisson_unlock_latch"), left: left}, err
		}})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	c, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	e := election.New(c, "resign", election.Options{})
	ctx := context.Background()
	leading, _, err := e.Campaign(ctx, "a")
	require.NoError(t, err)
	next := newNode(t, s, 0)
	nextLed := campaignAsync(ctx, next.election("resign"), "b")
	left.Store(1)
	require.NoError(t, e.Resign(leading), "the failed send is sent again")
	assert.Negative(t, left.Load(), "the release failed once on the wire, and went again")
	got := redistest.Recv(t, nextLed)
	require.NoError(t, got.err)
	assert.ErrorIs(t, e.Resign(leading), election.ErrNotLeader)
	require.NoError(t, next.election("resign").Resign(got.held))
}

// etcd #19597: a Campaign (or a lock wait) went on waiting after its
// session expired, for a leadership it could no longer hold. Here the
// Client is a candidate's session: its Close ends a Campaign that waits,
// with ErrClosed, within two seconds (a wake, not the leader's TTL), and
// leaves no candidacy behind.
func TestCloseEndsAWaitingCampaign(t *testing.T) {
	s := start(t)
	leader := newNode(t, s, 0)
	rdb := s.Client()
	waiter, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	leading, _, err := leader.election("session").Campaign(ctx, "leader")
	require.NoError(t, err)
	waiting := campaignAsync(ctx, election.New(waiter, "session", election.Options{}), "waiter")
	redistest.Eventually(t, 10*time.Second, "the waiter to wait", func() bool {
		chans, _ := s.Do("PUBSUB", "CHANNELS", "*{session}*").AsStrSlice()
		return len(chans) > 0
	})
	closed := time.Now()
	require.NoError(t, waiter.Close())
	assert.ErrorIs(t, redistest.Recv(t, waiting).err, reentrant.ErrClosed)
	assert.Less(t, time.Since(closed), 2*time.Second, "ended by Close, not by a TTL")
	require.NoError(t, leader.election("session").Resign(leading))
	n, err := s.Do("EXISTS", "session").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "no candidacy left")
}
