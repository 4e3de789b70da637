package reentrant_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// loseReplies is a connection that, while armed, lets a script call through,
// waits until its reply starts to arrive (so the script ran), then drops it
// and breaks the connection. A NOSCRIPT reply is let through: that script
// did not run, and the reply to lose is the one of the EVAL that follows.
type loseReplies struct {
	net.Conn
	armed   *atomic.Int32     // replies still to lose
	pending atomic.Bool       // a script was written and its reply is due
	lost    func()            // if set, called once a reply is lost
	match   func([]byte) bool // if set, only writes it matches count
}

func (c *loseReplies) Write(b []byte) (int, error) {
	if c.armed.Load() > 0 && bytes.Contains(b, []byte("EVAL")) && (c.match == nil || c.match(b)) {
		c.pending.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *loseReplies) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && bytes.HasPrefix(b[:n], []byte("-NOSCRIPT")) {
		// The script did not run; its resend as EVAL, perhaps on another
		// connection, is the one whose reply to lose. Left pending, this
		// connection would lose the reply of whatever it reads next.
		c.pending.Store(false)
		return n, err
	}
	if n > 0 && c.pending.CompareAndSwap(true, false) && takeOne(c.armed) {
		c.Conn.Close()
		if c.lost != nil {
			c.lost()
		}
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// takeOne takes one from n if n is above zero, and reports whether it did.
func takeOne(n *atomic.Int32) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// Redisson #4109: a fair lock's tryLock whose reply timed out left the lock
// held, and only the same instance, re-entering, could take it again. An
// acquire whose reply is lost after the script ran leaves no orphan: a waiting
// Lock releases what the lost attempt took and goes on to hold the lock
// exactly once; a TryLock that gives up releases it too. Without this the
// orphan would block every caller until its TTL ended.
func TestLostAcquireReply(t *testing.T) {
	s := redistest.Start(t)
	c, armed := loseRepliesClient(t, s)
	l := c.Lock("lost-reply")
	exists := func() int64 {
		n, err := s.Do("EXISTS", "lost-reply").AsInt64()
		require.NoError(t, err)
		return n
	}

	armed.Store(1)
	held, err := l.Lock(bg())
	require.NoError(t, err, "the wait goes on after the lost reply")
	assert.Zero(t, armed.Load(), "a reply was lost")
	n, _ := l.HoldCount(held)
	assert.Equal(t, 1, n)
	fields, err := s.Do("HGETALL", "lost-reply").AsStrMap()
	require.NoError(t, err)
	assert.Len(t, fields, 1, "one owner in Redis")
	for _, v := range fields {
		assert.Equal(t, "1", v, "held once, not twice")
	}
	require.NoError(t, l.Unlock(held))
	assert.Zero(t, exists())

	armed.Store(1)
	_, ok, err := l.TryLock(bg())
	assert.False(t, ok)
	require.Error(t, err, "TryLock does not wait: it reports the lost reply")
	assert.False(t, errors.Is(err, reentrant.ErrNotAcquired))
	assert.Zero(t, exists(), "and leaves no orphan")

	// An owner the caller gave may be in use elsewhere: nothing is
	// released on its behalf, and the error is the caller's to handle.
	armed.Store(1)
	owner := c.NewOwner()
	_, err = l.Lock(reentrant.WithOwner(bg(), owner))
	require.Error(t, err)
	assert.Equal(t, int64(1), exists(), "the given owner's possible hold is left to expire")
	require.NoError(t, s.Do("DEL", "lost-reply").Error())
}

// Redisson #4178: after an unlock whose reply timed out, the hold it meant to
// give back stayed, and the next lock of that thread counted as a re-entry. A
// release whose reply is lost after it ran is sent again with the same request
// id, and the unlock latch answers it: one hold is given back, not two, for
// every kind of lock. The last hold's release, lost too, frees the lock once;
// the read-write lock's latch answers its retry, while the other kinds wrote
// none (see scripts.Release.Believed), and their retry, finding the lock free,
// cannot tell that release from a loss: it says ErrLockLost.
func TestLostReleaseReply(t *testing.T) {
	s := redistest.Start(t)
	c, armed := loseRepliesClient(t, s)
	rw := c.ReadWriteLock("rw")
	for _, l := range []*reentrant.Lock{c.Lock("plain"), c.FairLock("fair"), c.PriorityLock("prio"), c.GroupLock("group", "a", "b"), rw.ReadLock(), rw.WriteLock()} {
		latched := l == rw.ReadLock() || l == rw.WriteLock()
		outer, err := l.Lock(bg())
		require.NoError(t, err)
		inner, err := l.Lock(outer)
		require.NoError(t, err)
		armed.Store(1)
		require.NoError(t, l.Unlock(inner), "%s: the retry is answered by the latch", l.Name())
		assert.Zero(t, armed.Load(), "a reply was lost")
		n, err := l.HoldCount(outer)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "%s: one hold given back, not two", l.Name())
		armed.Store(1)
		if err := l.Unlock(outer); latched {
			require.NoError(t, err, "%s: the last release's retry", l.Name())
		} else {
			require.ErrorIs(t, err, reentrant.ErrLockLost, "%s: the last release's retry", l.Name())
			assert.Contains(t, err.Error(), "reply was lost", l.Name())
		}
		assert.Zero(t, armed.Load(), "a reply was lost")
		locked, err := l.IsLocked(bg())
		require.NoError(t, err)
		assert.False(t, locked)
	}
}

// loseRepliesClient returns a client on s whose connections lose the reply
// of a script call while armed is above zero.
func loseRepliesClient(t *testing.T, s *redistest.Server) (*reentrant.Client, *atomic.Int32) {
	armed := new(atomic.Int32)
	return wrappedClient(t, s, reentrant.Options{}, func(c net.Conn) net.Conn { return &loseReplies{Conn: c, armed: armed} }), armed
}

// wrappedClient returns a client on s with opts whose connections are
// wrapped by wrap.
func wrappedClient(t *testing.T, s *redistest.Server, opts reentrant.Options, wrap func(net.Conn) net.Conn) *reentrant.Client {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{s.Addr}, DisableCache: true,
		DialCtxFn: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		},
	})
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	c, err := reentrant.New(rdb, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// A server that cannot run scripts for now (here a replica after a
// failover: READONLY; a restart's LOADING is the same case) does not end a
// wait or an unlock: the script did not run, so both back off and try again
// until the server takes writes.
func TestWaitsOutUnavailableServer(t *testing.T) {
	s, other := redistest.Start(t), redistest.Start(t)
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer c.Close()
	l := c.Lock("demoted")
	held, err := l.Lock(bg())
	require.NoError(t, err)

	host, port, _ := net.SplitHostPort(other.Addr)
	require.NoError(t, s.Do("REPLICAOF", host, port).Error())
	// The replica refuses writes; the hold went with its old data.
	_, ok, err := c.Lock("demoted-2").TryLock(bg())
	require.Error(t, err, "TryLock does not wait: it reports READONLY")
	assert.False(t, ok)

	waited, unlocked := make(chan error, 1), make(chan error, 1)
	go func() {
		h, err := c.Lock("demoted-2").Lock(bg())
		if err == nil {
			err = c.Lock("demoted-2").Unlock(h)
		}
		waited <- err
	}()
	go func() { unlocked <- l.Unlock(held) }()
	select {
	case err := <-waited:
		t.Fatalf("Lock returned while the server refused writes: %v", err)
	case err := <-unlocked:
		t.Fatalf("Unlock returned while the server refused writes: %v", err)
	case <-time.After(300 * time.Millisecond): // both wait; nothing to observe but silence
	}
	require.NoError(t, s.Do("REPLICAOF", "NO", "ONE").Error())
	for _, ch := range []chan error{waited, unlocked} {
		select {
		case err := <-ch:
			if ch == waited {
				require.NoError(t, err, "the wait went on and took the lock")
			} else if err != nil {
				// Whether the hold survived depends on whether the replica
				// had synced (and dropped its data) before its promotion.
				assert.ErrorIs(t, err, reentrant.ErrLockLost)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a call did not end once the server took writes")
		}
	}
	n, err := s.Do("EXISTS", "demoted").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "released")
}

// slowReplies is a connection whose reads, while armed, wait before they
// deliver: a reply arrives after its caller may have given up on it.
type slowReplies struct {
	net.Conn
	delay *atomic.Int64 // nanoseconds; 0 when disarmed
}

func (c *slowReplies) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if d := c.delay.Load(); d > 0 && n > 0 {
		time.Sleep(time.Duration(d))
	}
	return n, err
}

// lateReplies is a connection that, while armed, holds back the reply of a
// script call, once it arrives (so the script ran on time), while it runs
// meanwhile.
type lateReplies struct {
	net.Conn
	armed     *atomic.Int32 // replies still to hold back
	meanwhile func()
	pending   atomic.Bool       // a script was written and its reply is due
	match     func([]byte) bool // if set, only writes it matches count
}

func (c *lateReplies) Write(b []byte) (int, error) {
	if c.armed.Load() > 0 && bytes.Contains(b, []byte("EVAL")) && (c.match == nil || c.match(b)) {
		c.pending.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *lateReplies) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.pending.CompareAndSwap(true, false) && c.armed.Add(-1) >= 0 {
		c.meanwhile()
	}
	return n, err
}

// An acquire whose reply comes after the deadline its new hold would have
// had (0.9 TTL after it was sent) is not trusted: by then the key may have
// expired and another taken the lock, and a caller told "held" would work
// beside the new holder. One renewal asks Redis. Here the replies come
// 500ms after a 300ms TTL was sent, for a plain lock, a fair lock and a
// permit:
//   - the hold expired meanwhile: a waiting call goes on and takes the lock
//     (or permit) with a later attempt; a call that does not wait undoes
//     the attempt and returns an error that is not ErrNotAcquired;
//   - the hold is still there (its TTL extended meanwhile, as a slow reply
//     of a hold that lives would find it): it is kept, renewed.
func TestLateAcquireReply(t *testing.T) {
	s := redistest.Start(t)
	armed := new(atomic.Int32)
	var mu sync.Mutex
	var attempts []int // of each acquire call that took what it asked for
	var meanwhile func()
	opts := reentrant.Options{
		WatchdogTimeout: 300 * time.Millisecond,
		Hooks: reentrant.Hooks{AcquireEnded: func(_ context.Context, a reentrant.Acquire) {
			if a.Held {
				mu.Lock()
				attempts = append(attempts, a.Attempts)
				mu.Unlock()
			}
		}},
	}
	c := wrappedClient(t, s, opts, func(c net.Conn) net.Conn {
		return &lateReplies{Conn: c, armed: armed, meanwhile: func() { meanwhile() }}
	})
	lastAttempts := func() int {
		mu.Lock()
		defer mu.Unlock()
		return attempts[len(attempts)-1]
	}
	exists := func(key string) int64 {
		n, err := s.Do("EXISTS", key).AsInt64()
		require.NoError(t, err)
		return n
	}
	late := func(extend string) {
		meanwhile = func() {
			if extend != "" {
				require.NoError(t, s.Do("PEXPIRE", extend, "60000").Error())
			}
			time.Sleep(500 * time.Millisecond)
		}
		armed.Store(1)
	}
	heldOnce := func(name string) {
		t.Helper()
		fields, err := s.Do("HGETALL", name).AsStrMap()
		require.NoError(t, err)
		assert.Len(t, fields, 1, "%s: one owner in Redis", name)
		for _, v := range fields {
			assert.Equal(t, "1", v, "%s: held once", name)
		}
	}

	for _, l := range []*reentrant.Lock{c.Lock("late"), c.FairLock("late-fair"), c.PriorityLock("late-prio")} {
		held, err := l.Lock(bg()) // loads the scripts
		require.NoError(t, err)
		require.NoError(t, l.Unlock(held))

		late("")
		held, err = l.Lock(bg())
		require.NoError(t, err, "%s: the wait goes on after the late reply", l.Name())
		assert.Zero(t, armed.Load(), "a reply came late")
		assert.GreaterOrEqual(t, lastAttempts(), 2, "%s: the expired hold did not count as taken", l.Name())
		require.NoError(t, context.Cause(held), "%s: a live held context", l.Name())
		heldOnce(l.Name())
		require.NoError(t, l.Unlock(held))
		assert.Zero(t, exists(l.Name()))

		late("")
		_, ok, err := l.TryLock(bg())
		assert.False(t, ok, "%s: TryLock does not take a lock on a late reply", l.Name())
		require.Error(t, err)
		assert.NotErrorIs(t, err, reentrant.ErrNotAcquired, "Redis was slow: nobody else holds it")
		assert.Zero(t, exists(l.Name()), "%s: the late hold is undone", l.Name())

		late(l.Name())
		held, ok, err = l.TryLock(bg())
		require.NoError(t, err)
		assert.True(t, ok, "%s: the hold that lived is kept", l.Name())
		assert.Equal(t, 1, lastAttempts())
		heldOnce(l.Name())
		pttl, err := s.Do("PTTL", l.Name()).AsInt64()
		require.NoError(t, err)
		assert.LessOrEqual(t, pttl, int64(300), "%s: renewed to the TTL", l.Name())
		require.NoError(t, l.Unlock(held))
		assert.Zero(t, exists(l.Name()))
	}

	sem := c.PermitExpirableSemaphore("late-permits")
	_, err := sem.TrySetPermits(bg(), 2)
	require.NoError(t, err)
	permits := func() [2]int64 {
		available, taken, err := sem.Permits(bg())
		require.NoError(t, err)
		return [2]int64{available, taken}
	}
	p, err := sem.Acquire(bg()) // loads the scripts
	require.NoError(t, err)
	require.NoError(t, p.Release(bg()))
	late("")
	p, err = sem.Acquire(bg())
	require.NoError(t, err, "the wait goes on after the late reply")
	assert.Zero(t, armed.Load(), "a reply came late")
	assert.GreaterOrEqual(t, lastAttempts(), 2, "the expired permit did not count as taken")
	require.NoError(t, context.Cause(p.Context()))
	assert.Equal(t, [2]int64{1, 1}, permits(), "one permit taken, the expired one given back")
	require.NoError(t, p.Release(bg()))
	late("")
	_, ok, err := sem.TryAcquire(bg())
	assert.False(t, ok)
	require.Error(t, err)
	assert.NotErrorIs(t, err, reentrant.ErrNotAcquired)
	assert.Equal(t, [2]int64{2, 0}, permits(), "the late permit given back")
}

// A wait whose ctx ends while an attempt is in flight, after the script ran
// and took the lock, leaves no hold behind: the attempt is undone once its
// reply comes, instead of blocking every caller until its TTL (30s) ends.
// (TestAbandonedAttemptUndoneAfterItRuns holds the attempt itself back.)
func TestCancelledAttemptLeavesNoHold(t *testing.T) {
	s := redistest.Start(t)
	delay := new(atomic.Int64)
	c := wrappedClient(t, s, reentrant.Options{}, func(c net.Conn) net.Conn { return &slowReplies{Conn: c, delay: delay} })

	for _, l := range []*reentrant.Lock{c.Lock("cut"), c.FairLock("cut-fair"), c.PriorityLock("cut-prio"), c.GroupLock("cut-group", "a", "b")} {
		// Load the scripts first: a NOSCRIPT reply would mean nothing ran.
		held, err := l.Lock(bg())
		require.NoError(t, err)
		require.NoError(t, l.Unlock(held))
		delay.Store(int64(200 * time.Millisecond))
		// Cancelled, not timed out: rueidis then gives up on the reply at
		// once (with a deadline and no other call in flight, it would
		// wait for it on the connection's own deadline).
		ctx, cancel := context.WithCancel(bg())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err = l.Lock(ctx)
		require.ErrorIs(t, err, context.Canceled)
		delay.Store(0)
		redistest.Eventually(t, 2*time.Second, l.Name()+": the cut attempt's hold gone", func() bool {
			n, err := s.Do("EXISTS", l.Name()).AsInt64()
			return err == nil && n == 0
		})
	}
}

// With Redis unreachable for a whole wait, every way of waiting says so:
// an error that wraps the connection error, never "not acquired" (which
// means held by someone else). With Redis up and the lock held, a wait that
// runs out is "not acquired", as before.
func TestOutageIsNotNotAcquired(t *testing.T) {
	s := redistest.Start(t)
	c, err := reentrant.New(s.Client(), reentrant.Options{RepollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	holder, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer holder.Close()

	held, err := holder.Lock("busy").Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	_, ok, err := c.Lock("busy").TryLock(bg(), reentrant.WaitAtMost(100*time.Millisecond))
	require.NoError(t, err, "held by someone else")
	assert.False(t, ok)
	require.NoError(t, holder.Lock("busy").Unlock(held))

	s.Kill()
	refused := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		// Refused once the client redials; reset or closed when a connection
		// opened before the kill is the one that meets it (which one, the
		// machine's load decides).
		connErr := errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)
		assert.True(t, connErr, "the connection error is in the chain: %v", err)
		assert.NotErrorIs(t, err, reentrant.ErrNotAcquired, "an outage is not a lock held by someone else")
		assert.Equal(t, 1, strings.Count(err.Error(), "relock:"), "%q", err.Error())
	}
	_, ok, err = c.Lock("x").TryLock(bg(), reentrant.WaitAtMost(300*time.Millisecond))
	assert.False(t, ok)
	refused(t, err)
	_, ok, err = c.Lock("x").TryLock(bg())
	assert.False(t, ok)
	refused(t, err)
	ctx, cancel := context.WithTimeout(bg(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Lock("x").Lock(ctx)
	refused(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	refused(t, c.Do(bg(), "x", func(context.Context) error { return nil }, reentrant.WaitAtMost(300*time.Millisecond)))
	_, err = c.FairLock("x").Lock(bg(), reentrant.WaitAtMost(300*time.Millisecond))
	refused(t, err)
	_, err = c.Lock("x").Lock(bg(), reentrant.RetryCount(2), reentrant.RetryDelay(10*time.Millisecond))
	refused(t, err)
}

// A release that got its reply deletes its unlock latch right after, as
// Redisson does: unlocks leave no keys behind, where each used to leave one
// for ten seconds.
func TestUnlockLatchesDeleted(t *testing.T) {
	s := redistest.Start(t)
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer c.Close()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				for _, l := range []*reentrant.Lock{c.Lock(fmt.Sprintf("own:%d", g)), c.FairLock(fmt.Sprintf("fair:%d", g)), c.ReadWriteLock(fmt.Sprintf("rw:%d", g)).WriteLock()} {
					held, err := l.Lock(context.Background())
					if err == nil {
						err = l.Unlock(held)
					}
					assert.NoError(t, err)
				}
			}
		}()
	}
	waitAll(t, &wg, redistest.Within, func() {})
	// Well before the latches' own 10s TTL would remove them.
	redistest.Eventually(t, 5*time.Second, "every latch deleted", func() bool {
		keys, err := s.Do("KEYS", "redisson_unlock_latch:*").AsStrSlice()
		return err == nil && len(keys) == 0
	})
}

// One attempt whose reply was lost, in a wait whose later attempts are
// answered "held by someone else", ends as that answer: ErrNotAcquired, not
// an outage. Only a wait that ends while Redis does not answer is one.
func TestOneLostReplyIsNotOutage(t *testing.T) {
	s := redistest.Start(t)
	c, armed := loseRepliesClient(t, s)
	other, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer other.Close()
	held, err := other.Lock("busy").Lock(bg())
	require.NoError(t, err)
	_, ok, err := c.Lock("busy").TryLock(bg()) // loads the script
	require.NoError(t, err)
	require.False(t, ok)

	armed.Store(1)
	_, err = c.Lock("busy").Lock(bg(), reentrant.WaitAtMost(500*time.Millisecond))
	assert.Zero(t, armed.Load(), "a reply was lost")
	assert.ErrorIs(t, err, reentrant.ErrNotAcquired)
	require.NoError(t, other.Lock("busy").Unlock(held))
}

// A permit whose acquire reply came after its lease ended stays in the
// timeout set, expired, until a script reclaims it, and a script reclaims
// as many as it asks permits for: one here, the oldest. The wait's next
// attempt must not take it over by its id (a second count taken under one
// entry, given back once: a permit lost for good). Here another expired
// permit, older, is what that attempt reclaims.
func TestLatePermitIsNotTakenOver(t *testing.T) {
	s := redistest.Start(t)
	armed := new(atomic.Int32)
	// While the reply is held back, a client that dies leaves a permit
	// whose lease is long over.
	meanwhile := func() {
		s.Do("DECR", "taken-over")
		s.Do("ZADD", "{taken-over}:timeout", "1", "dead")
		time.Sleep(500 * time.Millisecond)
	}
	c := wrappedClient(t, s, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond}, func(c net.Conn) net.Conn {
		return &lateReplies{Conn: c, armed: armed, meanwhile: meanwhile}
	})
	sem := c.PermitExpirableSemaphore("taken-over")
	_, err := sem.TrySetPermits(bg(), 2)
	require.NoError(t, err)
	p, err := sem.Acquire(bg()) // loads the scripts
	require.NoError(t, err)
	require.NoError(t, p.Release(bg()))

	armed.Store(1)
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	p, err = sem.Acquire(ctx)
	require.NoError(t, err, "the wait goes on after the late reply")
	assert.Zero(t, armed.Load(), "a reply came late")
	available, taken, err := sem.Permits(bg())
	require.NoError(t, err)
	assert.Equal(t, [2]int64{1, 1}, [2]int64{available, taken}, "every permit accounted for")
	require.NoError(t, p.Release(bg()))
}

// A release refused for now (BUSY: another script runs) surely did not
// run. When its retry runs and the hold is gone (here that other script
// deleted it), Unlock says the lock was lost, and not that it cannot tell
// (see scripts.Release.Believed). So for a plain, a fair and a priority
// lock.
func TestUnlockAfterRefusedSendReportsLoss(t *testing.T) {
	s := redistest.Start(t)
	require.NoError(t, s.Do("CONFIG", "SET", "busy-reply-threshold", "10").Error())
	c, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer c.Close()
	for _, l := range []*reentrant.Lock{c.Lock("busy"), c.FairLock("busy-fair"), c.PriorityLock("busy-prio"), c.GroupLock("busy-group", "a")} {
		held, err := l.Lock(bg())
		require.NoError(t, err)

		busy := make(chan error, 1)
		other := s.Client()
		go func() {
			// Deletes the hold, then keeps the server busy for 300ms.
			busy <- other.Do(bg(), other.B().Eval().Script(`redis.call('del', KEYS[1])
local t = redis.call('time')
local stop = t[1] * 1000000 + t[2] + 300000
repeat t = redis.call('time') until t[1] * 1000000 + t[2] >= stop
return 1`).Numkeys(1).Key(l.Name()).Build()).Error()
		}()
		redistest.Eventually(t, 10*time.Second, "the server busy", func() bool {
			err := s.Do("EXISTS", "other").Error()
			return err != nil && strings.HasPrefix(err.Error(), "BUSY")
		})
		err = l.Unlock(held)
		assert.ErrorIs(t, err, reentrant.ErrLockLost, l.Name())
		assert.NotContains(t, fmt.Sprint(err), "reply was lost", l.Name())
		require.NoError(t, recv(t, busy))
	}
}

// refusals is a connection that tells, on seen, each reply it reads that
// holds a READONLY refusal.
type refusals struct {
	net.Conn
	seen chan<- time.Time
}

func (c refusals) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && bytes.Contains(b[:n], []byte("READONLY")) {
		select {
		case c.seen <- time.Now():
		default:
		}
	}
	return n, err
}

// A wait refused by a server that is up (a replica: READONLY; a restart's
// LOADING is the same case) pauses at most retry.UpPause (100 ms) between
// attempts, however long the refusals last: once the server takes writes,
// the waiter takes the lock within a few hundred ms of the last refusal,
// not after the full second a server that is down earns.
func TestRefusedWaitResumesSoon(t *testing.T) {
	s, other := redistest.Start(t), redistest.Start(t)
	seen := make(chan time.Time, 1)
	c := wrappedClient(t, s, reentrant.Options{}, func(c net.Conn) net.Conn { return refusals{c, seen} })
	host, port, _ := net.SplitHostPort(other.Addr)
	require.NoError(t, s.Do("REPLICAOF", host, port).Error())
	waited := make(chan error, 1)
	go func() {
		h, err := c.Lock("refused").Lock(bg())
		if err == nil {
			err = c.Lock("refused").Unlock(h)
		}
		waited <- err
	}()
	first := recv(t, seen)
	for last := first; last.Sub(first) < 2500*time.Millisecond; { // refused long enough for a down server's pause to reach 1 s
		last = recv(t, seen)
	}
	recv(t, seen) // just refused: the waiter pauses now
	require.NoError(t, s.Do("REPLICAOF", "NO", "ONE").Error())
	open := time.Now()
	require.NoError(t, recv(t, waited))
	took := time.Since(open)
	t.Logf("the waiter took the lock %v after the server took writes again", took.Round(time.Millisecond))
	assert.Less(t, took, 500*time.Millisecond, "paused at most UpPause after a refusal, not a second")
}

// cancelAfterReply is a rueidis client that, while armed, cancels a ctx
// as the reply of the next guarded acquire comes back, before its caller
// sees it: an attempt answered just as its ctx is cancelled.
type cancelAfterReply struct {
	rueidis.Client
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *cancelAfterReply) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	guarded := slices.ContainsFunc(cmd.Commands(), func(a string) bool { return strings.HasPrefix(a, "relock_abandoned:") })
	// cmd is recycled once sent: it is read before. A NOSCRIPT reply ran
	// nothing: the EVAL that follows is the attempt.
	r := c.Client.Do(ctx, cmd)
	if guarded && (r.Error() == nil || !strings.HasPrefix(r.Error().Error(), "NOSCRIPT")) {
		if f := c.cancel.Swap(nil); f != nil {
			(*f)()
		}
	}
	return r
}

// A guarded attempt answered just as its ctx is cancelled (not timed out)
// took the lock for an owner nobody will release: it is undone, and the
// lock is free within a moment, not after its 30 s lease.
func TestAttemptAnsweredAsItsCtxIsCancelledIsUndone(t *testing.T) {
	s := redistest.Start(t)
	rdb := &cancelAfterReply{Client: s.Client()}
	c, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	for _, l := range []*reentrant.Lock{c.Lock("answered"), c.NonReentrantLock("answered-nr")} {
		ctx, cancel := context.WithCancel(bg())
		rdb.cancel.Store(&cancel)
		_, err = l.Lock(ctx)
		require.ErrorIs(t, err, context.Canceled)
		redistest.Eventually(t, 5*time.Second, l.Name()+": the answered attempt undone", func() bool {
			n, err := s.Do("EXISTS", l.Name()).AsInt64()
			return err == nil && n == 0
		})
	}
}
