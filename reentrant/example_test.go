package reentrant_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// exampleRedis starts an embedded Redis for the examples; a real program
// connects to its Redis instead.
func exampleRedis() (rueidis.Client, func()) {
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{m.Addr()},
		DisableCache:      true,
		AlwaysRESP2:       true,
		ForceSingleClient: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	return rdb, func() { rdb.Close(); m.Close() }
}

func Example() {
	rdb, stop := exampleRedis()
	defer stop()

	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	mu := locks.Lock("order:42")
	ctx, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// Work under the lock uses ctx: it is cancelled if the lock is lost.
	fmt.Println("holding", mu.Name())
	if err := mu.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: holding order:42
}

// The context Lock returns carries the owner: a nested call with it
// re-enters the lock instead of waiting for itself.
func ExampleLock_Lock_reentrant() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.Lock("account:7")
	outer, _ := mu.Lock(context.Background())
	inner, _ := mu.Lock(outer)
	n, _ := mu.HoldCount(inner)
	fmt.Println("hold count:", n)
	mu.Unlock(inner)
	mu.Unlock(outer)
	locked, _ := mu.IsLocked(context.Background())
	fmt.Println("locked:", locked)
	// Output:
	// hold count: 2
	// locked: false
}

func ExampleLock_TryLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.Lock("report")
	held, _ := mu.Lock(context.Background())

	// Another owner waits at most 50ms, then gives up.
	_, ok, err := mu.TryLock(context.Background(), reentrant.WaitAtMost(50*time.Millisecond))
	fmt.Println("acquired:", ok, "error:", err)
	mu.Unlock(held)

	// With a lease, the lock is not renewed: it expires after 10s.
	held, ok, _ = mu.TryLock(context.Background(), reentrant.LeaseFor(10*time.Second))
	fmt.Println("acquired:", ok)
	mu.Unlock(held)
	// Output:
	// acquired: false error: <nil>
	// acquired: true
}

// An owner can be handed to another goroutine or process as a string.
func ExampleWithOwner() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.Lock("job:9")
	held, _ := mu.Lock(context.Background())
	owner, _ := reentrant.OwnerFrom(held)
	wire := owner.String() // send it to whoever finishes the job

	there, err := reentrant.ParseOwner(wire)
	if err != nil {
		log.Fatal(err)
	}
	err = mu.Unlock(reentrant.WithOwner(context.Background(), there))
	fmt.Println("released by the new owner:", err == nil)
	// Output: released by the new owner: true
}

// Loss of the lock cancels the held context, with ErrLockLost as its cause.
func ExampleErrLockLost() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.Lock("fragile")
	held, _ := mu.Lock(context.Background())
	mu.ForceUnlock(context.Background()) // someone breaks the lock
	<-held.Done()
	fmt.Println(errors.Is(context.Cause(held), reentrant.ErrLockLost))
	// Output: true
}

// A fenced lock hands out a token that only grows; a store that refuses
// smaller tokens turns away a holder whose lock expired.
func ExampleClient_FencedLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	f := locks.FencedLock("invoice:7")
	held, _ := f.Lock(context.Background())
	again, _ := f.Lock(held) // a re-entry draws a new token
	token, _ := reentrant.TokenFrom(held)
	token2, _ := reentrant.TokenFrom(again)
	fmt.Println("re-entry token is larger:", token2 > token)
	f.Unlock(again)
	f.Unlock(held)
	// Output:
	// re-entry token is larger: true
}

func ExampleClient_NonReentrantLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.NonReentrantLock("import:daily")
	held, _ := mu.Lock(context.Background())
	_, err := mu.Lock(held) // the holder again: refused at once
	fmt.Println("re-entry refused:", errors.Is(err, reentrant.ErrReentry))
	mu.Unlock(held)
	// Output: re-entry refused: true
}

func ExampleClient_NonReentrantFairLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.NonReentrantFairLock("ledger:close")
	held, _ := mu.Lock(context.Background())
	_, ok, err := mu.TryLock(held) // the holder again: refused, not queued
	fmt.Println("taken again:", ok, "re-entry refused:", errors.Is(err, reentrant.ErrReentry))
	mu.Unlock(held)
	// Output: taken again: false re-entry refused: true
}

func ExampleClient_GroupLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	// One hash for the class; each student is a value in it.
	held, _ := locks.GroupLock("class_100", "Jack_001", "Mary_002").Lock(context.Background())
	_, ok, _ := locks.GroupLock("class_100", "Mary_002").TryLock(context.Background())
	fmt.Println("Mary_002 free:", ok)
	other, ok, _ := locks.GroupLock("class_100", "Tom_003").TryLock(context.Background())
	fmt.Println("Tom_003 free:", ok)
	locks.GroupLock("class_100", "Tom_003").Unlock(other)
	locks.GroupLock("class_100", "Jack_001", "Mary_002").Unlock(held)
	// Output:
	// Mary_002 free: false
	// Tom_003 free: true
}

func ExampleClient_SpinLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	// Waiters retry with backoff from 1ms to 20ms; releases publish nothing.
	mu := locks.SpinLock("batch", reentrant.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond})
	held, _ := mu.Lock(context.Background())
	fmt.Println("held:", held.Err() == nil)
	mu.Unlock(held)
	// Output: held: true
}

func ExampleClient_Do() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	err := locks.Do(context.Background(), "nightly-report", func(ctx context.Context) error {
		fmt.Println("running under the lock")
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// running under the lock
	// error: <nil>
}

// A multi-lock takes all of its locks or none.
func ExampleMultiLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	transfer := reentrant.NewMultiLock(locks.Lock("account:1"), locks.Lock("account:2"))
	held, _ := transfer.Lock(context.Background())
	a, _ := locks.Lock("account:1").IsLocked(held)
	b, _ := locks.Lock("account:2").IsLocked(held)
	fmt.Println("both locked:", a && b)
	transfer.Unlock(held)
	// Output: both locked: true
}

// Redlock needs a majority of independent masters; here three embedded ones.
func ExampleRedlock() {
	var masters []*reentrant.Lock
	for i := 0; i < 3; i++ {
		rdb, stop := exampleRedis()
		defer stop()
		c, _ := reentrant.New(rdb, reentrant.Options{})
		defer c.Close()
		masters = append(masters, c.Lock("payout"))
	}
	rl := reentrant.NewRedlock(masters...)
	held, err := rl.Lock(context.Background(), reentrant.LeaseFor(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	valid, _ := held.Deadline() // the end of the validity
	fmt.Println("valid for most of the lease:", time.Until(valid) > 9*time.Second)
	rl.Unlock(held)
	// Output: valid for most of the lease: true
}

// A fair lock is granted in arrival order, across processes.
func ExampleClient_FairLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.FairLock("ticket-desk")
	held, _ := mu.Lock(context.Background())
	fmt.Println("first in line is served")
	mu.Unlock(held)
	// Output: first in line is served
}

// Many readers or one writer; a writer may downgrade to a reader.
func ExampleReadWriteLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	rw := locks.ReadWriteLock("catalog")
	w, _ := rw.WriteLock().Lock(context.Background())
	r, _ := rw.ReadLock().Lock(w) // downgrade: read while writing...
	rw.WriteLock().Unlock(w)      // ...then stop writing

	other, ok, _ := locks.ReadWriteLock("catalog").ReadLock().TryLock(context.Background())
	fmt.Println("another reader joins:", ok)
	rw.ReadLock().Unlock(other)
	rw.ReadLock().Unlock(r)
	// Output: another reader joins: true
}

// Replica sync refuses a lock no replica has confirmed: a failover could
// lose it. The embedded server has no replicas, so the acquire is rolled
// back and reported.
func ExampleReplicaSync() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{
		ReplicaSync: reentrant.ReplicaSync{Replicas: 1, Timeout: 10 * time.Millisecond},
	})
	defer locks.Close()

	_, err := locks.Lock("invoice:9").Lock(context.Background())
	fmt.Println(errors.Is(err, reentrant.ErrNotSynced))
	// Output: true
}

// A priority lock serves its best-placed waiter first: here, three jobs
// queued at priorities 1, 8 and 4 while the lock was held.
func ExampleClient_PriorityLock() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	ctx := context.Background()
	mu := locks.PriorityLock("reindex")
	held, _ := mu.Lock(ctx)
	var wg sync.WaitGroup
	for i, p := range []int{1, 8, 4} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := mu.Lock(ctx, reentrant.Priority(p))
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("priority", p, "runs")
			mu.Unlock(h)
		}()
		for info, _ := locks.Inspect(ctx, "reindex"); len(info.Queue) < i+1; info, _ = locks.Inspect(ctx, "reindex") {
			time.Sleep(time.Millisecond) // until it is queued
		}
	}
	mu.Unlock(held)
	wg.Wait()
	// Output:
	// priority 8 runs
	// priority 4 runs
	// priority 1 runs
}

// A Go service reads the Java service's Redisson YAML config, and connects
// where it does with its lock settings.
func ExampleFromRedissonConfig() {
	m, _ := miniredis.Run()
	defer m.Close()
	yaml := []byte(`
singleServerConfig:
  address: "redis://` + m.Addr() + `"
  connectionPoolSize: 64
lockWatchdogTimeout: 20000
`)
	cfg, err := reentrant.FromRedissonConfig(yaml)
	if err != nil {
		log.Fatal(err)
	}
	opt := cfg.Client
	opt.ForceSingleClient = true // miniredis; not needed with Redis
	rdb, _ := rueidis.NewClient(opt)
	defer rdb.Close()
	locks, _ := reentrant.New(rdb, cfg.Options)
	defer locks.Close()

	fmt.Println("watchdog:", cfg.Options.WatchdogTimeout, "ignored:", cfg.Ignored)
	held, err := locks.Lock("report").Lock(context.Background())
	fmt.Println("locked:", err == nil)
	locks.Lock("report").Unlock(held)
	// Output:
	// watchdog: 20s ignored: [singleServerConfig.connectionPoolSize]
	// locked: true
}

// A job that reports progress keeps its lock; one that goes its progress
// deadline without a report has it given back, and learns why from its
// held context.
func ExampleProgressWithin() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.Lock("nightly-import")
	held, err := mu.Lock(context.Background(), reentrant.ProgressWithin(500*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	for range 5 { // five steps, each well within the deadline
		time.Sleep(20 * time.Millisecond)
		reentrant.Progress(held)
	}
	fmt.Println("working:", held.Err() == nil)

	// A step that hangs: no more reports.
	<-held.Done()
	fmt.Println("stalled:", errors.Is(context.Cause(held), reentrant.ErrStalled))
	fmt.Println("unlock:", errors.Is(mu.Unlock(held), reentrant.ErrStalled))
	// Output:
	// working: true
	// stalled: true
	// unlock: true
}

// One long step says so, rather than every step getting a deadline that
// long; a step that finds it cannot go on gives the lock back at once.
func ExampleProgressDue() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()

	mu := locks.Lock("migration")
	held, err := mu.Lock(context.Background(), reentrant.ProgressWithin(50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	reentrant.ProgressDue(held, time.Second) // the next step is a long one
	time.Sleep(200 * time.Millisecond)       // four deadlines' worth
	fmt.Println("still held:", held.Err() == nil)

	reentrant.ProgressDue(held, 0) // it cannot go on: give the lock back now
	<-held.Done()
	fmt.Println("stalled:", errors.Is(context.Cause(held), reentrant.ErrStalled))
	// Output:
	// still held: true
	// stalled: true
}
