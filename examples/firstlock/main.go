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
	m, err := miniredis.Run() // a real service connects to its Redis instead
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{m.Addr()},
		DisableCache:      true, // relock reads nothing through the cache
		AlwaysRESP2:       true, // for miniredis only
		ForceSingleClient: true, // for miniredis only
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()

	locks, err := reentrant.New(rdb, reentrant.Options{}) // one per process
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	mu := locks.Lock("order:42")
	held, err := mu.Lock(context.Background()) // waits while another holds it
	if err != nil {
		log.Fatal(err)
	}
	defer mu.Unlock(held) // the context Lock returned: it is the lock
	fmt.Println("holding", mu.Name(), "until Unlock; held is cancelled if the lock is lost")
}
