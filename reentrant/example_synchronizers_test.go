package reentrant_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock/reentrant"
)

// A semaphore bounds how many callers work at once, across processes.
func ExampleSemaphore() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()
	ctx := context.Background()

	slots := locks.Semaphore("exports")
	slots.TrySetPermits(ctx, 2) // once, by whoever sets the system up
	if err := slots.Acquire(ctx, 1); err != nil {
		log.Fatal(err)
	}
	defer slots.Release(ctx, 1)
	left, _ := slots.Available(ctx)
	fmt.Println("slots left:", left)
	// Output: slots left: 1
}

// Every synchronizer's keys can be given a time to live, checked and
// deleted, as Redisson's RExpirable methods do, on all of its keys at once.
func ExampleSemaphore_Expire() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()
	ctx := context.Background()
	sem := locks.Semaphore("batch")

	set, err := sem.TrySetPermitsFor(ctx, 3, time.Hour) // trySetPermits(n, ttl)
	released, err := sem.ReleaseIfExists(ctx, 1)        // releaseIfExists(n)
	had, err := sem.ClearExpire(ctx)                    // clearExpire()
	had, err = sem.Expire(ctx, time.Minute)             // expire(Duration)
	exists, err := sem.Exists(ctx)                      // isExists()
	deleted, err := sem.Delete(ctx)                     // delete()

	fmt.Println(set, released, had, exists, deleted, err)
	// Output: true true true true true <nil>
}

// A permit from a permit-expirable semaphore has an id and, without
// LeaseFor, is kept by the watchdog for as long as this process lives.
func ExamplePermitExpirableSemaphore() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()
	ctx := context.Background()

	pool := locks.PermitExpirableSemaphore("gpu")
	pool.TrySetPermits(ctx, 1)
	p, err := pool.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Work with p.Context(): it is cancelled if the permit is lost.
	_, ok, _ := pool.TryAcquire(ctx)
	fmt.Println("second permit:", ok, "id length:", len(p.ID()))
	p.Release(ctx)
	// Output: second permit: false id length: 32
}

// A latch lets callers wait until a count of events has happened.
func ExampleCountDownLatch() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()
	ctx := context.Background()

	ready := locks.CountDownLatch("shards-loaded")
	ready.TrySetCount(ctx, 2)
	go func() {
		ready.CountDown(ctx) // each loader, when done
		ready.CountDown(ctx)
	}()
	if err := ready.Await(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("all loaded")
	// Output: all loaded
}

// A rate limiter spreads calls over time, across processes.
func ExampleRateLimiter() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, _ := reentrant.New(rdb, reentrant.Options{})
	defer locks.Close()
	ctx := context.Background()

	api := locks.RateLimiter("partner-api")
	api.TrySetRate(ctx, reentrant.Rate{Permits: 2, Interval: time.Minute})
	for i := range 3 {
		ok, _ := api.TryAcquire(ctx, 1) // Acquire would wait for the window instead
		fmt.Println("call", i+1, "allowed:", ok)
	}
	// Output:
	// call 1 allowed: true
	// call 2 allowed: true
	// call 3 allowed: false
}
