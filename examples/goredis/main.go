// relock beside go-redis: a service that already holds a go-redis client
// gives relock a rueidis client of its own, on the same Redis. The two
// share keys, not connections. go run . (on an embedded Redis), or
// go run . -addr 127.0.0.1:6379 to count the connections and memory
// relock's client adds on a real server.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"runtime"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

func main() {
	addr := flag.String("addr", "", "a Redis to use; empty starts an embedded one")
	flag.Parse()
	embedded := *addr == ""
	if embedded {
		m, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer m.Close()
		*addr = m.Addr()
	}
	ctx := context.Background()

	// The service's own client, as it was.
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	if err := rdb.Set(ctx, "orders:42:status", "new", 0).Err(); err != nil {
		log.Fatal(err)
	}
	before := connections(ctx, rdb, embedded)
	heapBefore := heap()

	// relock's: a rueidis client for the locks alone.
	locksRdb, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{*addr},
		DisableCache:      true,     // relock reads nothing through the cache
		AlwaysRESP2:       embedded, // for miniredis only
		ForceSingleClient: embedded, // for miniredis only
	})
	if err != nil {
		log.Fatal(err)
	}
	defer locksRdb.Close()
	locks, err := reentrant.New(locksRdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	// A lock taken with relock guards a write made with go-redis.
	err = locks.Do(ctx, "orders:42", func(held context.Context) error {
		return rdb.Set(held, "orders:42:status", "paid", 0).Err()
	})
	if err != nil {
		log.Fatal(err)
	}
	status, err := rdb.Get(ctx, "orders:42:status").Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order 42 is", status)

	if !embedded {
		fmt.Printf("relock's rueidis client added %d connections to Redis and %d KiB of Go heap\n",
			connections(ctx, rdb, false)-before, (heap()-heapBefore)/1024)
	}
}

// connections counts the server's client connections (CLIENT LIST), or
// returns 0 on the embedded server, which does not list them.
func connections(ctx context.Context, rdb *redis.Client, embedded bool) int {
	if embedded {
		return 0
	}
	list, err := rdb.ClientList(ctx).Result()
	if err != nil {
		log.Fatal(err)
	}
	return strings.Count(list, "\n")
}

// heap is the Go heap in use after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
