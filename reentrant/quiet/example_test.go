package quiet_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/quiet"
)

// A job writes to a store that cannot check tokens. Its lock gets a quiet
// period of 15 seconds (Consul's lock-delay default): when a holder's hold
// ends without a release, whoever takes the lock next waits that long
// before its work begins, so the late writes of a holder paused past its
// lease land before it. A released lock is free at once.
func Example() {
	m, err := miniredis.Run() // a program connects to its own Redis
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysRESP2: true, ForceSingleClient: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rdb.Close()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	mu := quiet.New(locks, "nightly-export", 15*time.Second)
	held, err := mu.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exporting")
	if err := mu.Unlock(held); err != nil {
		log.Fatal(err)
	}
	held, err = mu.Lock(context.Background()) // released: no quiet period
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exporting again")
	_ = mu.Unlock(held)
	// Output:
	// exporting
	// exporting again
}
