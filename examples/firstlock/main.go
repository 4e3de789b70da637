// A first lock, on an embedded Redis: go run ./examples/firstlock
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

func main() {
	srv := must(miniredis.Run()) // a real service connects to its own Redis
	defer srv.Close()
	rdb := must(rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{srv.Addr()},
		DisableCache: true, // relock reads nothing through the cache

		AlwaysRESP2: true, ForceSingleClient: true, // for miniredis only
	}))
	defer rdb.Close()
	locks := must(reentrant.New(rdb, reentrant.Options{})) // one per process
	defer locks.Close()

	mu := locks.Lock("order:42")
	held := must(mu.Lock(context.Background())) // waits while another holds it
	defer mu.Unlock(held)                       // held is the lock: Unlock takes it
	fmt.Println("holding", mu.Name(), "- held is cancelled if the lock is lost")
}

// must stops the program on an error; a service returns it instead.
func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
