// Deadlock: two jobs take two locks in opposite orders. Each holds one and
// waits for the other's, which would wait forever (the watchdog keeps both
// holds alive). relock sees the cycle after DeadlockTimeout (100ms here):
// the job that began waiting last gives up with ErrDeadlock, lets go of
// what it holds, and the other goes on.
//
//	go run ./examples/deadlock                           # embedded miniredis, nothing to install
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/deadlock # a real Redis
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/relock-go/relock/examples/internal/demo"
	"github.com/relock-go/relock/reentrant"
)

func main() {
	rdb, stop := demo.Connect()
	defer stop()
	locks, err := reentrant.New(rdb, reentrant.Options{DeadlockTimeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	ctx := context.Background()
	accounts, ledger := locks.Lock("relock:deadlock:accounts"), locks.Lock("relock:deadlock:ledger")

	// Each job holds its first lock before either asks for its second.
	transfer, err := accounts.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	audit, err := ledger.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	job := func(name string, held context.Context, first, second *reentrant.Lock) {
		defer wg.Done()
		// Waiting with held, the job waits as the owner of its first lock.
		both, err := second.Lock(held)
		var dl *reentrant.DeadlockError
		switch {
		case errors.As(err, &dl):
			fmt.Printf("%s: gave up on a cycle of %d waits (%v), lets go of %s\n", name, len(dl.Cycle), errors.Is(err, reentrant.ErrDeadlock), first.Name())
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("%s: has both locks\n", name)
			second.Unlock(both)
		}
		first.Unlock(held)
	}
	wg.Add(2)
	go job("transfer", transfer, accounts, ledger)
	time.Sleep(20 * time.Millisecond) // audit begins to wait last: it is the one to give up
	go job("audit", audit, ledger, accounts)
	wg.Wait()
}
