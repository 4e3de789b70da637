package reentrant_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// Readers overlap; a writer excludes readers and writers; both sides are
// reentrant; the layout is Redisson's.
func TestReadWriteExclusion(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		ra, rb := a.ReadWriteLock("rw"), b.ReadWriteLock("rw")

		r1, err := ra.ReadLock().Lock(bg())
		require.NoError(t, err)
		r2, ok, err := rb.ReadLock().TryLock(bg())
		require.NoError(t, err)
		require.True(t, ok, "readers overlap")
		r1b, err := ra.ReadLock().Lock(r1)
		require.NoError(t, err, "read re-entry")
		fields, err := e.do(t, "HGETALL", "rw").AsStrMap()
		require.NoError(t, err)
		o1, _ := reentrant.OwnerFrom(r1)
		assert.Equal(t, "read", fields["mode"])
		assert.Equal(t, "2", fields[o1.String()])
		for k := 1; k <= 2; k++ {
			assert.Equal(t, int64(1), e.int(t, "EXISTS", "{rw}:"+o1.String()+":rwlock_timeout:"+string(rune('0'+k))))
		}
		_, ok, err = rb.WriteLock().TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok, "readers exclude a writer")

		require.NoError(t, ra.ReadLock().Unlock(r1b))
		require.NoError(t, ra.ReadLock().Unlock(r1))
		require.NoError(t, rb.ReadLock().Unlock(r2))
		assert.Empty(t, keys(t, e), "nothing left after the last reader")

		w, err := ra.WriteLock().Lock(bg())
		require.NoError(t, err)
		w2, err := ra.WriteLock().Lock(w)
		require.NoError(t, err, "write re-entry")
		fields, err = e.do(t, "HGETALL", "rw").AsStrMap()
		require.NoError(t, err)
		ow, _ := reentrant.OwnerFrom(w)
		assert.Equal(t, map[string]string{"mode": "write", ow.String() + ":write": "2"}, fields)
		_, ok, err = rb.ReadLock().TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok, "a writer excludes readers")
		_, ok, err = rb.WriteLock().TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok, "a writer excludes writers")
		require.NoError(t, ra.WriteLock().Unlock(w2))
		require.NoError(t, ra.WriteLock().Unlock(w))
		assert.Empty(t, keys(t, e))
		assert.ErrorIs(t, ra.WriteLock().Unlock(w), reentrant.ErrNotHeld)
	})
}

// keys lists the keys of lock "rw" and its read holds. Unlock latches are
// left out: each lives for the release window, whatever the lock's state.
func keys(t *testing.T, e env) []string {
	t.Helper()
	all, err := e.do(t, "KEYS", "*rw*").AsStrSlice()
	require.NoError(t, err)
	var lock []string
	for _, k := range all {
		if !strings.HasPrefix(k, "redisson_unlock_latch:") {
			lock = append(lock, k)
		}
	}
	return lock
}

// A writer may take the read side and then let go of the write side: the
// lock stays held for reading, other readers may join, writers may not.
func TestReadWriteDowngrade(t *testing.T) {
	onBoth(t, func(t *testing.T, e env) {
		a, b := e.client(t), e.client(t)
		rw := a.ReadWriteLock("down")
		w, err := rw.WriteLock().Lock(bg())
		require.NoError(t, err)
		r, err := rw.ReadLock().Lock(w)
		require.NoError(t, err, "a writer may read")
		require.NoError(t, rw.WriteLock().Unlock(w))
		mode, err := e.do(t, "HGET", "down", "mode").ToString()
		require.NoError(t, err)
		assert.Equal(t, "read", mode)
		other, ok, err := b.ReadWriteLock("down").ReadLock().TryLock(bg())
		require.NoError(t, err)
		assert.True(t, ok, "readers join after the downgrade")
		_, ok, err = b.ReadWriteLock("down").WriteLock().TryLock(bg())
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, rw.ReadLock().Unlock(r))
		require.NoError(t, b.ReadWriteLock("down").ReadLock().Unlock(other))
		assert.Equal(t, int64(0), e.int(t, "EXISTS", "down"))
	})
}

// A write unlock publishes "1", which wakes every waiting reader at once,
// not one per client. Without it the readers after the first would wait
// for the writer's TTL (30s) or their re-poll (a minute): all of them must
// hold the lock together within a tenth of that.
func TestWriteUnlockWakesAllReaders(t *testing.T) {
	e := onRedis(t)
	writer, readers := e.client(t), e.patient(t)
	w, err := writer.ReadWriteLock("wake").WriteLock().Lock(bg())
	require.NoError(t, err)
	const n = 5
	var wg, holding sync.WaitGroup
	holding.Add(n)
	release := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := readers.ReadWriteLock("wake").ReadLock().Lock(bg())
			if !assert.NoError(t, err) {
				holding.Done()
				return
			}
			holding.Done()
			<-release // every reader holds the lock together
			assert.NoError(t, readers.ReadWriteLock("wake").ReadLock().Unlock(r))
		}()
	}
	eventually(t, "the readers' subscription", func() bool { return e.numsub(t, "redisson_rwlock:{wake}") == 1 })
	start := time.Now()
	require.NoError(t, writer.ReadWriteLock("wake").WriteLock().Unlock(w))
	done := make(chan struct{})
	go func() { holding.Wait(); close(done) }()
	select {
	case <-done:
		t.Logf("%d readers in %v after the write unlock", n, time.Since(start))
	case <-time.After(3 * time.Second):
		t.Fatal("readers not all woken by the write unlock")
	}
	close(release)
	waitAll(t, &wg, redistest.Within, func() {})
}

// The watchdog keeps both sides: ten minutes of fake time, and the read
// holds' timeout keys live on with the hash.
func TestReadWriteWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c, _ := fakeTimeClient(t, reentrant.Options{})
		rw := c.ReadWriteLock("kept")
		r, err := rw.ReadLock().Lock(bg())
		require.NoError(t, err)
		owner, _ := reentrant.OwnerFrom(r)
		w, err := c.ReadWriteLock("kept-w").WriteLock().Lock(bg())
		require.NoError(t, err)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.NoError(t, r.Err())
		require.NoError(t, w.Err())
		assert.Greater(t, m.TTL("{kept}:"+owner.String()+":rwlock_timeout:1"), 19*time.Second)
		assert.Greater(t, m.TTL("kept"), 19*time.Second)
		assert.Greater(t, m.TTL("kept-w"), 19*time.Second)
		require.NoError(t, rw.ReadLock().Unlock(r))
		require.NoError(t, c.ReadWriteLock("kept-w").WriteLock().Unlock(w))
		assert.False(t, m.Exists("kept"))
		assert.False(t, m.Exists("{kept}:"+owner.String()+":rwlock_timeout:1"))

		// And a read hold whose key is deleted is reported lost.
		r, err = rw.ReadLock().Lock(bg())
		require.NoError(t, err)
		m.Del("kept")
		<-r.Done()
		assert.ErrorIs(t, context.Cause(r), reentrant.ErrLockLost)
	})
}

// A Redisson-protocol reader blocks a relock writer and its release wakes
// it; a relock reader blocks a Redisson writer and its release wakes that.
// Both sides read together.
func TestReadWriteRedissonInterop(t *testing.T) {
	e := onRedis(t)
	c := e.patient(t)
	java := redissontest.New(e.rdb(t))
	rw := c.ReadWriteLock("mixed-rw")

	require.NoError(t, java.Read(bg(), "mixed-rw", 1))
	r, ok, err := rw.ReadLock().TryLock(bg())
	require.NoError(t, err)
	require.True(t, ok, "Go and Java read together")
	require.NoError(t, rw.ReadLock().Unlock(r))
	_, ok, err = rw.WriteLock().TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "a Java reader blocks a Go writer")
	got := make(chan error, 1)
	go func() {
		w, err := rw.WriteLock().Lock(bg())
		if err == nil {
			err = rw.WriteLock().Unlock(w)
		}
		got <- err
	}()
	eventually(t, "the Go writer's subscription", func() bool { return e.numsub(t, "redisson_rwlock:{mixed-rw}") == 1 })
	require.NoError(t, java.ReadUnlock(bg(), "mixed-rw", 1))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Go writer not woken by the Java reader's release")
	}

	r, err = rw.ReadLock().Lock(bg())
	require.NoError(t, err)
	pttl, err := java.TryWrite(bg(), "mixed-rw", 2)
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0), "a Go reader blocks a Java writer")
	javaGot := make(chan error, 1)
	go func() { javaGot <- java.Write(bg(), "mixed-rw", 2) }()
	eventually(t, "the Java writer's subscription", func() bool { return e.numsub(t, "redisson_rwlock:{mixed-rw}") >= 1 })
	require.NoError(t, rw.ReadLock().Unlock(r))
	select {
	case err := <-javaGot:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Java writer not woken by the Go reader's release")
	}
	_, ok, err = rw.ReadLock().TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "a Java writer blocks a Go reader")
	require.NoError(t, java.WriteUnlock(bg(), "mixed-rw", 2))
	assert.Equal(t, int64(0), e.int(t, "EXISTS", "mixed-rw"))
}

// A reader with a short lease does not shorten the lock's TTL under a
// reader kept for longer (Redisson keeps the larger): were it shortened, a
// writer would get in while the first reader still believes it holds.
func TestShortReaderKeepsLongerTTL(t *testing.T) {
	e := onRedis(t)
	long, short, writer := e.client(t), e.client(t), e.client(t)
	held, err := long.ReadWriteLock("readers").ReadLock().Lock(bg(), reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	brief, err := short.ReadWriteLock("readers").ReadLock().Lock(bg(), reentrant.LeaseFor(300*time.Millisecond))
	require.NoError(t, err)
	assert.Greater(t, e.int(t, "PTTL", "readers"), int64(50_000), "the longer lease stays")
	recv(t, brief.Done()) // the short reader's lease ran out
	eventually(t, "the short lease's own key to expire", func() bool {
		o, _ := reentrant.OwnerFrom(brief)
		return e.int(t, "EXISTS", "{readers}:"+o.String()+":rwlock_timeout:1") == 0
	})
	_, ok, err := writer.ReadWriteLock("readers").WriteLock().TryLock(bg())
	require.NoError(t, err)
	assert.False(t, ok, "no writer while a reader holds")
	require.NoError(t, context.Cause(held))
	require.NoError(t, long.ReadWriteLock("readers").ReadLock().Unlock(held))
}

// A reader whose process dies (SIGKILL) is not kept alive by a live
// reader's renewals (Redisson #1458, fixed by Redisson 4.4's #7098): its
// read hold's timeout key expires a TTL (1 s, its own watchdog's) after its
// death, though reader B goes on reading and renewing every 500 ms, before
// that key would expire; so when B releases, writer C, waiting all along,
// gets the lock within a wake-up, not after B's renewals' TTL of the dead
// reader's key. (Renewing every reader's keys, B would keep the dead one's
// for as long as it reads.)
func TestCrashedReaderLetsGo(t *testing.T) {
	e := onRedis(t)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), holderEnv+"="+e.server.Addr+"|crashed-reader|read")
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)

	const ttl = 1500 * time.Millisecond
	b := e.client(t, reentrant.Options{WatchdogTimeout: ttl}).ReadWriteLock("crashed-reader")
	reading, err := b.ReadLock().Lock(bg())
	require.NoError(t, err)
	require.NoError(t, child.Process.Kill()) // reader A dies holding
	_ = child.Wait()
	died := time.Now()

	c := e.client(t, reentrant.Options{WatchdogTimeout: ttl}).ReadWriteLock("crashed-reader")
	written := make(chan time.Time, 1)
	go func() {
		held, err := c.WriteLock().Lock(bg(), reentrant.WaitAtMost(30*time.Second))
		if assert.NoError(t, err) {
			at := time.Now()
			assert.NoError(t, c.WriteLock().Unlock(held))
			written <- at // after the release: the test's end closes Redis
		}
	}()
	// B reads on past A's TTL, renewing its own hold every second.
	eventually(t, "the dead reader's timeout key expired", func() bool {
		keys, err := e.do(t, "KEYS", "{crashed-reader}:*:rwlock_timeout:*").AsStrSlice()
		return err == nil && len(keys) == 1
	})
	assert.Greater(t, time.Since(died), 500*time.Millisecond, "A's key outlived a renewal period of its own")
	time.Sleep(ttl / 3) // and B renewed again since
	released := time.Now()
	require.NoError(t, b.ReadLock().Unlock(reading))
	got := recv(t, written)
	assert.Less(t, got.Sub(released), ttl/2, "C waited on the dead reader's key after B's release")
	t.Logf("C wrote %v after B's release", got.Sub(released).Round(time.Millisecond))
}

// Read renewals of both sides touch their own readers' keys only, as
// Redisson 4.4 renews (the peer's ReadRenew, ReadLockTask.buildChunk): a
// Java reader that stops renewing (its process died) lets its timeout key
// expire at its lease though a relock reader renews on, and a relock
// reader with a lease of its own is not kept by the Java reader's
// renewals. When the last live reader releases, a Java writer waiting all
// along gets the lock within a wake-up.
func TestReadRenewalsKeepTheirOwnReaders(t *testing.T) {
	e := onRedis(t)
	java := redissontest.New(e.rdb(t))
	java.Lease = 800 * time.Millisecond
	const name = "mixed-renew"
	require.NoError(t, java.Read(bg(), name, 1)) // dies without renewing
	require.NoError(t, java.Read(bg(), name, 2)) // renews on
	live := e.client(t, reentrant.Options{WatchdogTimeout: 900 * time.Millisecond}).ReadWriteLock(name)
	reading, err := live.ReadLock().Lock(bg())
	require.NoError(t, err)
	leased, err := e.client(t).ReadWriteLock(name).ReadLock().Lock(bg(), reentrant.LeaseFor(700*time.Millisecond))
	require.NoError(t, err)
	leasedOwner, _ := reentrant.OwnerFrom(leased)

	renewing, stop := make(chan error, 1), make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				renewing <- nil
				return
			case <-time.After(java.Lease / 3):
			}
			if ok, err := java.ReadRenew(bg(), name, 2); err != nil || !ok {
				renewing <- fmt.Errorf("the Java reader's renewal: held %v, %v", ok, err)
				return
			}
		}
	}()
	timeout := func(owner string) int64 {
		return e.int(t, "EXISTS", "{"+name+"}:"+owner+":rwlock_timeout:1")
	}
	eventually(t, "the dead Java reader's and the leased reader's timeout keys to expire", func() bool {
		return timeout(java.Owner(1)) == 0 && timeout(leasedOwner.String()) == 0
	})
	assert.Equal(t, int64(1), timeout(java.Owner(2)), "the renewing Java reader's key stays")
	close(stop)
	require.NoError(t, recv(t, renewing))
	require.NoError(t, context.Cause(reading), "the relock reader is renewed by its own watchdog")

	writer := redissontest.New(e.rdb(t))
	written := make(chan error, 1)
	go func() { written <- writer.Write(bg(), name, 3) }()
	eventually(t, "the Java writer's subscription", func() bool { return e.numsub(t, "redisson_rwlock:{"+name+"}") >= 1 })
	require.NoError(t, java.ReadUnlock(bg(), name, 2))
	// The dead reader's count stays in the hash, its key gone.
	released := time.Now()
	require.NoError(t, live.ReadLock().Unlock(reading))
	require.NoError(t, recv(t, written))
	assert.Less(t, time.Since(released), 500*time.Millisecond, "the writer took it within a wake-up")
	require.NoError(t, writer.WriteUnlock(bg(), name, 3))
}
