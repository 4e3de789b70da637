// Rate limit: calls to a partner API spread to 5 per 200ms across every
// process that shares the limiter (Redisson's RRateLimiter, OVERALL).
//
//	go run ./examples/ratelimit                           # embedded miniredis, nothing to install
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/ratelimit # a real Redis
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock/examples/internal/demo"
	"github.com/relock-go/relock/reentrant"
)

func main() {
	locks, stop := demo.Locks()
	defer stop()
	ctx := context.Background()

	api := locks.RateLimiter("relock:example:partner-api")
	if err := api.SetRate(ctx, reentrant.Rate{Permits: 5, Interval: 200 * time.Millisecond}); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	for call := 1; call <= 12; call++ {
		if err := api.Acquire(ctx, 1); err != nil { // sleeps until the window has room
			log.Fatal(err)
		}
		fmt.Printf("call %2d at %3d ms\n", call, time.Since(start).Milliseconds())
	}
	ok, _ := api.TryAcquire(ctx, 1)
	fmt.Printf("one more right now: %v\n", ok)
}
