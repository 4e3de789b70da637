package reentrant_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// A fair lock's release hands the lock to the waiter at the head of the
// queue: the waiter's Lock returns with no attempt of its own, one script
// (the release) after the holder let go, and the waiter holds it as any
// Lock would, the watchdog's lease included. A waiter with a fixed lease
// takes no grant: its wait ends with an attempt, as before.
func TestFairReleaseGrantsHead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []reentrant.LockOption
		scripts int64 // run from the release to the waiter's return
	}{
		{"watchdog", nil, 1},
		{"fixed lease", []reentrant.LockOption{reentrant.LeaseFor(30 * time.Second)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := onRedis(t)
			holder, waiter := e.client(t), e.client(t)
			// Redis learns the scripts first, so that each runs as one
			// call from here on.
			held, err := holder.FairLock("fair").Lock(bg())
			require.NoError(t, err)
			require.NoError(t, holder.FairLock("fair").Unlock(held))
			require.NoError(t, e.do(t, "CONFIG", "RESETSTAT").Error())
			held, err = holder.FairLock("fair").Lock(bg())
			require.NoError(t, err)

			type result struct {
				ctx context.Context
				err error
			}
			got := make(chan result, 1)
			go func() {
				ctx, err := waiter.FairLock("fair").Lock(bg(), tc.opts...)
				got <- result{ctx, err}
			}()
			// Queued and listening: its channel has a subscriber, and it
			// made its second attempt, the one after subscribing (three
			// scripts with the holder's).
			eventually(t, "the waiter listens", func() bool {
				chans, err := e.do(t, "PUBSUB", "CHANNELS", "redisson_lock__channel:{fair}:*").AsStrSlice()
				return err == nil && len(chans) == 1 && e.server.ScriptCalls() == 3
			})
			before := e.server.ScriptCalls()
			require.NoError(t, holder.FairLock("fair").Unlock(held))
			r := recv(t, got)
			require.NoError(t, r.err)
			assert.Equal(t, tc.scripts, e.server.ScriptCalls()-before, "scripts from the release to the waiter's return")

			info, err := waiter.Inspect(bg(), "fair")
			require.NoError(t, err)
			assert.Len(t, info.Holders, 1)
			assert.EqualValues(t, 0, e.int(t, "LLEN", fairQueue), "the waiter left the queue")
			assert.Greater(t, e.int(t, "PTTL", "fair"), int64(0))
			require.NoError(t, waiter.FairLock("fair").Unlock(r.ctx))
			assert.EqualValues(t, 0, e.int(t, "EXISTS", "fair", "relock_grants:{fair}"), "nothing is left behind")
		})
	}
}

// A client whose last wait on a fair lock queued subscribes before the
// first attempt of its next wait on it: a grant after that attempt is
// heard, so the wait takes two scripts, its attempt and the release that
// hands it the lock, where the first wait took three (a second attempt
// once subscribed). A wait that finds the lock free makes it forget.
func TestFairContendedWaitSubscribesFirst(t *testing.T) {
	e := onRedis(t)
	holder, waiter := e.client(t), e.client(t)
	lock := func(c *reentrant.Client) context.Context {
		ctx, err := c.FairLock("fair").Lock(bg())
		require.NoError(t, err)
		return ctx
	}
	unlock := func(c *reentrant.Client, ctx context.Context) {
		require.NoError(t, c.FairLock("fair").Unlock(ctx))
	}
	unlock(waiter, lock(waiter)) // Redis learns the scripts
	for i, want := range []int64{3, 2, 2} {
		held := lock(holder)
		require.NoError(t, e.do(t, "CONFIG", "RESETSTAT").Error())
		got := make(chan context.Context, 1)
		go func() { got <- lock(waiter) }()
		eventually(t, "the waiter queues and listens", func() bool {
			chans, err := e.do(t, "PUBSUB", "CHANNELS", "redisson_lock__channel:{fair}:*").AsStrSlice()
			return err == nil && len(chans) == 1 && e.server.ScriptCalls() == want-1
		})
		unlock(holder, held)
		unlock(waiter, recv(t, got))
		assert.Equal(t, want+1, e.server.ScriptCalls(), "wait %d: scripts from its start to its return, and its release", i)
	}
	unlock(waiter, lock(waiter)) // free: the next wait subscribes after its attempt again
	held := lock(holder)
	require.NoError(t, e.do(t, "CONFIG", "RESETSTAT").Error())
	got := make(chan context.Context, 1)
	go func() { got <- lock(waiter) }()
	eventually(t, "the waiter attempts again once subscribed", func() bool { return e.server.ScriptCalls() == 2 })
	unlock(holder, held)
	unlock(waiter, recv(t, got))
}

// A fair waiter keeps the lock a release handed it after its attempt's
// reply was lost: its next attempt takes the grant. Giving back what the
// lost attempt might have taken, as other waits do, would hand the lock to
// the waiter behind it and send this one to the end of the queue.
func TestFairLostAttemptKeepsGrant(t *testing.T) {
	e := onRedis(t)
	holder, behind := e.client(t), e.client(t)
	held, err := holder.FairLock("fair").Lock(bg())
	require.NoError(t, err)

	var armed atomic.Int32
	behindGot := make(chan context.Context, 1)
	lost := func() { // the waiter's attempt ran and queued it
		go func() {
			ctx, err := behind.FairLock("fair").Lock(bg())
			assert.NoError(t, err)
			behindGot <- ctx
		}()
		eventually(t, "the second waiter queues", func() bool { return e.int(t, "LLEN", fairQueue) == 2 })
		assert.NoError(t, holder.FairLock("fair").Unlock(held)) // grants the lock to the first
	}
	waiter := wrappedClient(t, e.server, reentrant.Options{}, func(c net.Conn) net.Conn {
		return &loseReplies{Conn: c, armed: &armed, lost: lost}
	})
	armed.Store(1)
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	got, err := waiter.FairLock("fair").Lock(ctx)
	select {
	case ctx := <-behindGot:
		require.NoError(t, behind.FairLock("fair").Unlock(ctx))
		t.Fatal("the lock went to the waiter behind")
	default:
	}
	require.NoError(t, err)
	assert.Zero(t, armed.Load(), "a reply was lost")
	n, err := waiter.FairLock("fair").HoldCount(got)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one hold")
	assert.EqualValues(t, 1, e.int(t, "LLEN", fairQueue), "the waiter behind is still queued")
	require.NoError(t, waiter.FairLock("fair").Unlock(got))
	require.NoError(t, behind.FairLock("fair").Unlock(recv(t, behindGot)))
}

// A client with ReplicaSync takes no grant: its acquire must be confirmed
// by its own WAIT, so its wait ends with an attempt after the release.
func TestFairNoGrantWithReplicaSync(t *testing.T) {
	r := redistest.StartReplicated(t, 1)
	r.WaitSynced(t)
	holder, err := reentrant.New(r.Master.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer holder.Close()
	waiter, err := reentrant.New(r.Master.Client(), reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: 2 * time.Second}})
	require.NoError(t, err)
	defer waiter.Close()

	held, err := holder.FairLock("fair").Lock(bg())
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		ctx, err := waiter.FairLock("fair").Lock(bg())
		if err == nil {
			err = waiter.FairLock("fair").Unlock(ctx)
		}
		got <- err
	}()
	redistest.Eventually(t, 20*time.Second, "the waiter queues", func() bool {
		n, err := r.Master.Do("LLEN", fairQueue).AsInt64()
		return err == nil && n == 1
	})
	n, err := r.Master.Do("EXISTS", "relock_grants:{fair}").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the queued waiter is not recorded as taking grants")
	require.NoError(t, holder.FairLock("fair").Unlock(held))
	require.NoError(t, recv(t, got))
}
