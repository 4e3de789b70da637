package reentrant_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// slowWrites is a connection that, while armed, holds the next script call
// back for delay before writing it, then reports it written on ran; with
// only set, the next script call that names only. seen, when set, is shown
// every write first.
type slowWrites struct {
	net.Conn
	armed *atomic.Bool
	only  *atomic.Pointer[string]
	seen  *atomic.Pointer[func([]byte)]
	delay time.Duration
	ran   chan<- struct{}
}

func (c *slowWrites) Write(b []byte) (int, error) {
	if seen := c.seen.Load(); seen != nil {
		(*seen)(b)
	}
	only := c.only.Load()
	if !bytes.Contains(b, []byte("EVAL")) || only != nil && !bytes.Contains(b, []byte(*only)) || !c.armed.CompareAndSwap(true, false) {
		return c.Conn.Write(b)
	}
	time.Sleep(c.delay)
	defer func() { c.ran <- struct{}{} }()
	return c.Conn.Write(b)
}

// An attempt that the caller's ctx cuts short leaves nothing once it has
// run. rueidis spreads a client's commands over several connections (here
// two), so an undo sent at once could run before the attempt, which would
// then take the lock, join the fair queue or take the permit for an owner
// nobody will release: everyone would wait out its lease, or its turn at
// the head of the queue. So a plain or non-reentrant lock's attempt is
// guarded (its undo first sets a guard that makes a late attempt do
// nothing), and the others are undone only once their reply has come. Here
// the attempt is held back 300ms on its connection while ctx ends after
// 50ms. Each round has even odds that the undo takes the other connection,
// so eight rounds catch an undo that can overtake the attempt almost surely
// (an unguarded plain lock's fails here).
func TestAbandonedAttemptUndoneAfterItRuns(t *testing.T) {
	s := redistest.Start(t)
	var armed atomic.Bool
	var only atomic.Pointer[string]
	var seen atomic.Pointer[func([]byte)]
	ran := make(chan struct{}, 1)
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.Addr}, DisableCache: true, PipelineMultiplex: 1,
		DialCtxFn: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return &slowWrites{Conn: c, armed: &armed, only: &only, seen: &seen, delay: 300 * time.Millisecond, ran: ran}, nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	c, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	other, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	bg := context.Background()

	// cutShort arms the delay, runs acquire with a ctx that ends first,
	// and waits until the held-back attempt has been written.
	cutShort := func(acquire func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		defer cancel()
		armed.Store(true)
		require.ErrorIs(t, acquire(ctx), context.DeadlineExceeded)
		<-ran
	}
	gone := func(what string, count func() int64) {
		t.Helper()
		redistest.Eventually(t, 2*time.Second, what, func() bool { return count() == 0 })
	}
	exists := func(key string) func() int64 {
		return func() int64 { n, _ := s.Do("EXISTS", key).AsInt64(); return n }
	}

	sem := c.PermitExpirableSemaphore("abandoned-sem")
	_, err = sem.TrySetPermits(bg, 1)
	require.NoError(t, err)
	// Load every script first, guarded ones too (a ctx that can end):
	// a NOSCRIPT retry is a second write.
	loading, loaded := context.WithCancel(bg)
	defer loaded()
	for _, l := range []*reentrant.Lock{c.Lock("abandoned-plain"), c.NonReentrantLock("abandoned-nr"), c.FairLock("abandoned-fair"), c.PriorityLock("abandoned-prio")} {
		held, err := l.Lock(loading)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(held))
	}
	p, err := sem.Acquire(bg)
	require.NoError(t, err)
	require.NoError(t, p.Release(bg))

	for range 8 {
		// A free lock: the late attempt, guarded, finds its guard set and
		// takes nothing (or, overtaking it, is released). Only the attempt
		// is held back (it alone names the guard), not its undo, which
		// runs in the background; the round waits for it to be sent.
		guard := "relock_abandoned"
		only.Store(&guard)
		for _, l := range []*reentrant.Lock{c.Lock("abandoned-plain"), c.NonReentrantLock("abandoned-nr")} {
			released := make(chan struct{}, 1)
			watch := func(b []byte) {
				if bytes.Contains(b, []byte("EVAL")) && bytes.Contains(b, []byte(l.Name())) && !bytes.Contains(b, []byte(guard)) {
					select {
					case released <- struct{}{}:
					default:
					}
				}
			}
			seen.Store(&watch)
			cutShort(func(ctx context.Context) error { _, err := l.Lock(ctx); return err })
			redistest.Recv(t, released) // the undo's release, sent after the guard
			seen.Store(nil)
			gone("a late hold of "+l.Name(), exists(l.Name()))
		}
		only.Store(nil)

		// A held fair lock: the late attempt joins the queue, and the
		// waiter leaves it.
		fair := other.FairLock("abandoned-fair")
		held, err := fair.Lock(bg)
		require.NoError(t, err)
		cutShort(func(ctx context.Context) error { _, err := c.FairLock("abandoned-fair").Lock(ctx); return err })
		gone("a fair queue's ghost waiter", func() int64 {
			n, _ := s.Do("LLEN", "redisson_lock_queue:{abandoned-fair}").AsInt64()
			return n
		})
		require.NoError(t, fair.Unlock(held))

		// A held priority lock: likewise.
		prio := other.PriorityLock("abandoned-prio")
		held, err = prio.Lock(bg)
		require.NoError(t, err)
		cutShort(func(ctx context.Context) error { _, err := c.PriorityLock("abandoned-prio").Lock(ctx); return err })
		gone("a priority queue's ghost waiter", func() int64 {
			n, _ := s.Do("ZCARD", "relock_priority_queue:{abandoned-prio}").AsInt64()
			return n
		})
		require.NoError(t, prio.Unlock(held))

		// A free permit: the late attempt takes it, and the undo gives it back.
		cutShort(func(ctx context.Context) error { _, err := sem.Acquire(ctx); return err })
		gone("a late permit", func() int64 {
			_, taken, _ := sem.Permits(bg)
			return taken
		})
	}
}
