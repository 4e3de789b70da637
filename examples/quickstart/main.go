// Quickstart: a nested (reentrant) section, then two workers taking turns on
// one lock.
//
//	go run ./examples/quickstart                           # embedded miniredis, nothing to install
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/quickstart # a real Redis
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/relock-go/relock/examples/internal/demo"
)

func main() {
	locks, stop := demo.Locks()
	defer stop()
	ctx := context.Background()

	// A nested section: the context Lock returns carries the owner, so
	// taking the same lock again with it re-enters instead of deadlocking.
	mu := locks.Lock("relock:quickstart:order:42")
	outer, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	inner, err := mu.Lock(outer)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := mu.HoldCount(inner)
	fmt.Printf("nested: holding %s %d times\n", mu.Name(), n)
	mu.Unlock(inner)
	mu.Unlock(outer)
	locked, _ := mu.IsLocked(ctx)
	fmt.Printf("nested: released, locked=%v\n", locked)

	// Two workers contend for one lock; each turn is exclusive.
	var wg sync.WaitGroup
	for w := 1; w <= 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shared := locks.Lock("relock:quickstart:printer")
			for turn := 1; turn <= 2; turn++ {
				held, err := shared.Lock(ctx)
				if err != nil {
					log.Fatal(err)
				}
				fmt.Printf("worker %d: has the lock (turn %d)\n", w, turn)
				time.Sleep(20 * time.Millisecond)
				fmt.Printf("worker %d: releases it\n", w)
				if err := shared.Unlock(held); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
}
