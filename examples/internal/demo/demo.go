// Package demo connects the examples to Redis: the server at REDIS_ADDR when
// it is set, else an embedded miniredis, so that they run with nothing
// installed.
package demo

import (
	"fmt"
	"log"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// Connect returns a client and a function that closes it (and the embedded
// server, if any), and says in one line which Redis it uses.
func Connect() (rueidis.Client, func()) {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		fmt.Printf("using Redis at %s\n", addr)
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		return rdb, rdb.Close
	}
	fmt.Println("using an embedded miniredis (set REDIS_ADDR=host:port to use a real Redis)")
	m, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	m.ClockTTL(true) // key TTLs follow the clock, as on a real server
	rdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{m.Addr()},
		DisableCache:      true, // miniredis has no client-side caching
		AlwaysRESP2:       true, // miniredis refuses commands on a subscribed RESP3 connection
		ForceSingleClient: true, // else rueidis takes miniredis for a one-node cluster
	})
	if err != nil {
		log.Fatal(err)
	}
	return rdb, func() { rdb.Close(); m.Close() }
}

// Locks returns a relock Client with default options on Connect's Redis,
// and a function that closes both.
func Locks() (*reentrant.Client, func()) {
	rdb, stop := Connect()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		stop()
		log.Fatal(err)
	}
	return locks, func() { locks.Close(); stop() }
}
