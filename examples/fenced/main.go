// Fenced: a store that rejects writes from a holder whose lock has expired.
//
// Two workers write to one record under a fenced lock. Worker A is paused
// (think: a long GC pause) past its lease; B takes the lock and writes. When
// A wakes up and writes, still believing it holds the lock, the store sees
// A's token is smaller than one it has already accepted and refuses it.
//
//	go run ./examples/fenced                           # embedded miniredis
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/fenced # a real Redis
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

// Store is the storage layer: it remembers the largest token it has
// accepted and refuses any write carrying a smaller one. The check and the
// write happen atomically (here a mutex; in a database, a conditional
// UPDATE ... WHERE token <= $1, or a compare-and-set). A read that feeds a
// read-modify-write must carry the token as well (see docs/fencing.md).
type Store struct {
	mu        sync.Mutex
	highToken int64
	value     string
}

var ErrStaleToken = errors.New("stale fencing token")

func (s *Store) Write(token int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highToken {
		return fmt.Errorf("%w: %d < %d", ErrStaleToken, token, s.highToken)
	}
	s.highToken, s.value = token, value
	return nil
}

func main() {
	locks, stop := demo.Locks()
	defer stop()
	ctx := context.Background()
	store := &Store{}
	mu := locks.FencedLock("relock:example:record")

	// A takes the lock with a short lease, then stalls past it.
	heldA, err := mu.Lock(ctx, reentrant.LeaseFor(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	tokenA, _ := reentrant.TokenFrom(heldA)
	fmt.Printf("A holds the lock with token %d, then pauses\n", tokenA)

	// The lease runs out; B takes the lock and writes.
	heldB, err := mu.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	tokenB, _ := reentrant.TokenFrom(heldB)
	fmt.Printf("B holds the lock with token %d and writes: %v\n", tokenB, store.Write(tokenB, "B's data"))

	// A resumes. Its held context says the lease is over, but suppose A
	// ignores it: the store still refuses the stale write.
	fmt.Printf("A's held context: %v\n", context.Cause(heldA))
	fmt.Printf("A writes anyway: %v\n", store.Write(tokenA, "A's data"))
	fmt.Printf("the record holds %q\n", store.value)
	mu.Unlock(heldB)
}
