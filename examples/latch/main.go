// Latch: a coordinator waits until three loaders have each counted down a
// count-down latch (in a real deployment, from other processes or Java
// services on Redisson's RCountDownLatch).
//
//	go run ./examples/latch                           # embedded miniredis, nothing to install
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/latch # a real Redis
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock/examples/internal/demo"
)

func main() {
	locks, stop := demo.Locks()
	defer stop()
	ctx := context.Background()

	loaded := locks.CountDownLatch("relock:example:shards-loaded")
	if _, err := loaded.TrySetCount(ctx, 3); err != nil {
		log.Fatal(err)
	}
	for shard := 1; shard <= 3; shard++ {
		go func() {
			time.Sleep(time.Duration(shard) * 30 * time.Millisecond) // loading
			fmt.Printf("loader %d: done\n", shard)
			if err := loaded.CountDown(ctx); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := loaded.Await(wait); err != nil {
		log.Fatal(err)
	}
	n, _ := loaded.Count(ctx)
	fmt.Printf("coordinator: every shard loaded (count %d)\n", n)
}
