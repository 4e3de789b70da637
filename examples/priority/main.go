// Priority: urgent work first. While a job holds a priority lock, three
// more queue for it at priorities 0, 9 and 5, in that order; when it is
// released they are served 9, 5, 0. Within one priority, arrival order
// holds, and aging (Options.PriorityAging, 1s a level by default) keeps a
// low priority from waiting forever.
//
//	go run ./examples/priority                           # embedded miniredis, nothing to install
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/priority # a real Redis
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/relock-go/relock/examples/internal/demo"
	"github.com/relock-go/relock/reentrant"
)

func main() {
	locks, stop := demo.Locks()
	defer stop()
	ctx := context.Background()
	const name = "relock:priority:reindex"
	mu := locks.PriorityLock(name)

	held, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("nightly job: has the lock")

	var wg sync.WaitGroup
	for i, p := range []int{0, 9, 5} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := mu.Lock(ctx, reentrant.Priority(p))
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("job at priority %d: has the lock\n", p)
			if err := mu.Unlock(h); err != nil {
				log.Fatal(err)
			}
		}()
		waitQueued(ctx, locks, name, i+1) // so that arrival order is the order above
	}

	info, err := locks.Inspect(ctx, name)
	if err != nil {
		log.Fatal(err)
	}
	for i, w := range info.Queue {
		fmt.Printf("queue %d: priority %d\n", i+1, w.Priority)
	}
	fmt.Println("nightly job: releases it")
	if err := mu.Unlock(held); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
}

// waitQueued waits until n waiters are queued for the lock.
func waitQueued(ctx context.Context, locks *reentrant.Client, name string, n int) {
	for {
		info, err := locks.Inspect(ctx, name)
		if err != nil {
			log.Fatal(err)
		}
		if len(info.Queue) == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
