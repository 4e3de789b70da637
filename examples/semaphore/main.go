// Semaphore: five workers share three slots of a permit-expirable
// semaphore; each permit is kept by the watchdog while its worker runs, and
// no more than three run at once.
//
//	go run ./examples/semaphore                           # embedded miniredis, nothing to install
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/semaphore # a real Redis
package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/examples/internal/demo"
)

func main() {
	locks, stop := demo.Locks()
	defer stop()
	ctx := context.Background()

	slots := locks.PermitExpirableSemaphore("relock:example:render-slots")
	if err := slots.SetPermits(ctx, 3); err != nil {
		log.Fatal(err)
	}
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for w := 1; w <= 5; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := slots.Acquire(ctx)
			if err != nil {
				log.Fatal(err)
			}
			defer p.Release(ctx)
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			fmt.Printf("worker %d: rendering with permit %s…\n", w, p.ID()[:8])
			select { // work with the permit's context: it ends if the permit is lost
			case <-time.After(50 * time.Millisecond):
			case <-p.Context().Done():
				log.Fatal(context.Cause(p.Context()))
			}
			running.Add(-1)
		}()
	}
	wg.Wait()
	available, taken, _ := slots.Permits(ctx)
	fmt.Printf("done: at most %d at once; %d available, %d taken\n", most.Load(), available, taken)
}
