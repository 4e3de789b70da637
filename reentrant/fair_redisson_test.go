package reentrant_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// The tests below share one fair queue between relock waiters and
// Redisson-protocol waiters (internal/redissontest, which replays
// RedissonFairLock's scripts and RedissonLock's waiting). relock's clients
// re-poll only every 10s and a Java waiter waits for its message up to the
// TTL its script replied (30s, or minutes for a waiter behind others), so a
// wake-up that goes missing costs far more than handoffBound, which every
// handoff must stay under.
const (
	fairRepoll   = 10 * time.Second
	handoffBound = fairRepoll / 10
)

// fairWaiter is one waiter of the mixed queue: a relock owner or a Java
// thread.
type fairWaiter struct {
	name string
	lock func(ctx context.Context) error
	free func() error
}

func goFairWaiter(t *testing.T, c *reentrant.Client, name string) fairWaiter {
	l := c.FairLock("fair")
	var held context.Context
	return fairWaiter{
		name: name,
		lock: func(ctx context.Context) (err error) {
			held, err = l.Lock(ctx)
			return err
		},
		free: func() error { return l.Unlock(held) },
	}
}

func javaFairWaiter(t *testing.T, java *redissontest.Client, tid int64, name string) fairWaiter {
	return fairWaiter{
		name: name,
		lock: func(ctx context.Context) error { return java.FairLock(ctx, "fair", tid) },
		free: func() error {
			held, err := java.FairUnlock(bg(), "fair", tid)
			if err == nil && !held {
				t.Errorf("%s released a lock it did not hold", name)
			}
			return err
		},
	}
}

// assertFairClean checks that nothing of lock "fair" is left in Redis.
func assertFairClean(t *testing.T, e env) {
	t.Helper()
	for _, k := range []string{"fair", fairQueue, fairTimeouts} {
		assert.Equal(t, int64(0), e.int(t, "EXISTS", k), k+" left behind")
	}
}

// A queue of Java and relock waiters, joined in a known order, is served
// in that order, each handoff prompt: every release wakes exactly the next
// waiter on its own channel, whichever side it is on.
func TestFairMixedQueueOrder(t *testing.T) {
	e := onRedis(t)
	opts := reentrant.Options{RepollInterval: fairRepoll}
	c1, c2 := e.client(t, opts), e.client(t, opts)
	java := redissontest.New(e.rdb(t))
	waiters := []fairWaiter{
		javaFairWaiter(t, java, 1, "java-a"),
		goFairWaiter(t, c1, "go-q"),
		javaFairWaiter(t, java, 2, "java-b"),
		goFairWaiter(t, c2, "go-q2"),
		javaFairWaiter(t, java, 3, "java-c"),
	}
	holder := c1.FairLock("fair")
	held, err := holder.Lock(bg())
	require.NoError(t, err)

	type event struct {
		name     string
		acquired time.Time
		released time.Time
	}
	events := make(chan event, len(waiters))
	var wg sync.WaitGroup
	for i, w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(bg(), time.Minute)
			defer cancel()
			if !assert.NoError(t, w.lock(ctx), w.name) {
				return
			}
			ev := event{name: w.name, acquired: time.Now()}
			time.Sleep(5 * time.Millisecond)
			ev.released = time.Now()
			assert.NoError(t, w.free(), w.name)
			events <- ev
		}()
		eventually(t, w.name+" to queue", func() bool { return e.int(t, "LLEN", fairQueue) == int64(i+1) })
	}
	queue, err := e.do(t, "LRANGE", fairQueue, "0", "-1").AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{java.Owner(1), queue[1], java.Owner(2), queue[3], java.Owner(3)}, queue)

	released := time.Now()
	require.NoError(t, holder.Unlock(held))
	waitAll(t, &wg, redistest.Within, func() {})
	close(events)
	// Holds never overlap, so their acquisition times give the order in
	// which the turns were taken.
	var all []event
	for ev := range events {
		all = append(all, ev)
	}
	slices.SortFunc(all, func(a, b event) int { return a.acquired.Compare(b.acquired) })
	var order []string
	var longest time.Duration
	for _, ev := range all {
		order = append(order, ev.name)
		gap := ev.acquired.Sub(released)
		longest = max(longest, gap)
		assert.Less(t, gap, handoffBound, "%s took its turn %v after the release before it", ev.name, gap)
		released = ev.released
	}
	assert.Equal(t, []string{"java-a", "go-q", "java-b", "go-q2", "java-c"}, order)
	t.Logf("longest handoff: %v", longest)
	assertFairClean(t, e)
}

// deadline returns the queued owner's deadline in the ZSET.
func deadline(t *testing.T, e env, owner string) int64 {
	t.Helper()
	s, err := e.do(t, "ZSCORE", fairTimeouts, owner).ToString()
	require.NoError(t, err)
	f, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return int64(f)
}

// A Java waiter queued behind a relock waiter that gives up moves up, as
// Redisson's acquireFailed moves it (its deadline one turn earlier), and is
// woken by the next release; if the lock is already free when the relock
// waiter gives up at the head, the Java waiter is told at once. A force
// unlock tells the head too.
func TestFairJavaBehindGoGivesUp(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{RepollInterval: fairRepoll})
	java := redissontest.New(e.rdb(t))
	turn := (300 * time.Second).Milliseconds()

	for _, how := range []string{"release", "free when it gives up", "force unlock"} {
		t.Run(how, func(t *testing.T) {
			holder := c.FairLock("fair")
			held, err := holder.Lock(bg())
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(bg())
			goDone := make(chan error, 1)
			go func() { _, err := c.FairLock("fair").Lock(ctx); goDone <- err }()
			eventually(t, "the relock waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 1 })
			javaDone := make(chan time.Time, 1)
			go func() {
				wctx, cancel := context.WithTimeout(bg(), time.Minute)
				defer cancel()
				if assert.NoError(t, java.FairLock(wctx, "fair", 1)) {
					javaDone <- time.Now()
				}
			}()
			eventually(t, "the Java waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 2 })
			before := deadline(t, e, java.Owner(1))

			if how == "free when it gives up" {
				// The hold vanishes without a release (it expired).
				e.do(t, "DEL", "fair")
			}
			cancel()
			require.ErrorIs(t, recv(t, goDone), context.Canceled)
			freed := time.Now()
			if how != "free when it gives up" { // else the Java waiter may have its turn already
				// An attempt in flight when ctx ended is heard out first:
				// the relock waiter leaves once its reply has come.
				eventually(t, "the Java waiter to move one turn earlier, as acquireFailed leaves it", func() bool {
					return deadline(t, e, java.Owner(1)) == before-turn
				})
			}
			switch how {
			case "release":
				freed = time.Now()
				require.NoError(t, holder.Unlock(held))
			case "force unlock":
				freed = time.Now()
				ok, err := holder.ForceUnlock(bg())
				require.NoError(t, err)
				assert.True(t, ok)
			}
			select {
			case at := <-javaDone:
				t.Logf("Java waiter took the lock %v after it was freed", at.Sub(freed))
				assert.Less(t, at.Sub(freed), handoffBound)
			case <-time.After(time.Minute):
				t.Fatal("Java waiter stranded")
			}
			held2, err := java.FairUnlock(bg(), "fair", 1)
			require.NoError(t, err)
			assert.True(t, held2)
			assertFairClean(t, e)
		})
	}
}

// relock and Java waiters take turns on one counter with read-modify-write
// under the fair lock: no update is lost and no two are ever inside at once.
func TestFairMixedMutualExclusion(t *testing.T) {
	e := onRedis(t)
	opts := reentrant.Options{RepollInterval: fairRepoll}
	clients := []*reentrant.Client{e.client(t, opts), e.client(t, opts)}
	java := redissontest.New(e.rdb(t))
	const rounds = 15
	var inside atomic.Bool
	var overlaps atomic.Int64
	increment := func() {
		if !inside.CompareAndSwap(false, true) {
			overlaps.Add(1)
		}
		n, err := e.do(t, "GET", "counter").AsInt64()
		if err != nil {
			n = 0
		}
		e.do(t, "SET", "counter", strconv.FormatInt(n+1, 10))
		inside.Store(false)
	}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(3)
		for _, c := range clients {
			go func() {
				defer wg.Done()
				l := c.FairLock("fair")
				for r := 0; r < rounds; r++ {
					held, err := l.Lock(bg())
					if !assert.NoError(t, err) {
						return
					}
					increment()
					assert.NoError(t, l.Unlock(held))
				}
			}()
		}
		go func(tid int64) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				ctx, cancel := context.WithTimeout(bg(), time.Minute)
				err := java.FairLock(ctx, "fair", tid)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				increment()
				held, err := java.FairUnlock(bg(), "fair", tid)
				assert.NoError(t, err)
				assert.True(t, held)
			}
		}(int64(i + 1))
	}
	waitAll(t, &wg, redistest.Within, func() {})
	assert.Zero(t, overlaps.Load(), "two holders inside at once")
	assert.Equal(t, int64(9*rounds), e.int(t, "GET", "counter"), "updates lost")
	assertFairClean(t, e)
}

// A relock waiter queued behind a Java tryLock that runs out of time moves
// up a turn (the Java wait time, as acquireFailed takes it off) and is
// woken by the next release.
func TestFairGoBehindJavaGivesUp(t *testing.T) {
	e := onRedis(t)
	c := e.client(t, reentrant.Options{RepollInterval: fairRepoll})
	java := redissontest.New(e.rdb(t))
	holder := c.FairLock("fair")
	held, err := holder.Lock(bg())
	require.NoError(t, err)

	const javaWait = 300 * time.Millisecond
	javaDone := make(chan bool, 1)
	go func() {
		ok, err := java.FairTryLock(bg(), "fair", 1, javaWait)
		assert.NoError(t, err)
		javaDone <- ok
	}()
	eventually(t, "the Java waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 1 })
	owner := c.NewOwner()
	goDone := make(chan time.Time, 1)
	unlocked := make(chan struct{})
	defer func() { recv(t, unlocked) }() // the waiter's Unlock, before the client closes
	go func() {
		defer close(unlocked)
		wctx, cancel := context.WithTimeout(bg(), time.Minute)
		defer cancel()
		ctx, err := c.FairLock("fair").Lock(reentrant.WithOwner(wctx, owner))
		if assert.NoError(t, err) {
			goDone <- time.Now()
			assert.NoError(t, c.FairLock("fair").Unlock(ctx))
		}
	}()
	eventually(t, "the relock waiter to queue", func() bool { return e.int(t, "LLEN", fairQueue) == 2 })
	before := deadline(t, e, owner.String())
	require.False(t, recv(t, javaDone), "the Java tryLock runs out of time")
	assert.Equal(t, before-javaWait.Milliseconds(), deadline(t, e, owner.String()), "one Java turn earlier")

	freed := time.Now()
	require.NoError(t, holder.Unlock(held))
	select {
	case at := <-goDone:
		t.Logf("relock waiter took the lock %v after the release", at.Sub(freed))
		assert.Less(t, at.Sub(freed), handoffBound)
	case <-time.After(time.Minute):
		t.Fatal("relock waiter stranded")
	}
	eventually(t, "the queue to empty", func() bool { return e.int(t, "EXISTS", "fair", fairQueue, fairTimeouts) == 0 })
}
