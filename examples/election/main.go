// Election: one leader at a time among candidates, with fenced terms.
//
// Three candidates run for leader of one election. Each, once it leads,
// writes its name to a shared key under its term and steps down; an
// observer prints every change of leader as it is announced. Last, the
// first leader, woken late, tries to write again with its old term, and
// the key refuses it.
//
//	go run ./examples/election                           # embedded miniredis
//	REDIS_ADDR=127.0.0.1:6379 go run ./examples/election # a real Redis
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
	"github.com/relock-go/relock/reentrant/election"
)

func main() {
	rdb, stop := demo.Connect()
	defer stop()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	ctx := context.Background()
	e := election.New(locks, "relock:example:leader", election.Options{})
	store := election.NewFenced(locks)

	watching, stopWatching := context.WithCancel(ctx)
	changes := e.Observe(watching)
	var watched sync.WaitGroup
	watched.Add(1)
	go func() {
		defer watched.Done()
		for l := range changes {
			if l.Err != nil {
				fmt.Println("observer: cannot see who leads:", l.Err)
				continue
			}
			if l.Owner == "" {
				fmt.Println("observer: nobody leads")
				continue
			}
			fmt.Printf("observer: %s leads\n", l.Value)
		}
	}()

	const key = "relock:example:config"
	var first, last election.Term
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range []string{"alpha", "beta", "gamma"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.Run(ctx, name, func(leading context.Context, term election.Term) error {
				mu.Lock()
				if first == 0 {
					first = term
				}
				last = term
				mu.Unlock()
				fmt.Printf("%s leads\n", name)
				time.Sleep(100 * time.Millisecond) // the leader's work
				return store.Set(leading, key, term, "written by "+name)
			})
			if err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()

	// The first leader, paused all this while, wakes and writes with its term.
	err = store.Set(ctx, key, first, "written late by the first leader")
	if !errors.Is(err, election.ErrStaleTerm) {
		log.Fatalf("a stale leader's write went through: %v", err)
	}
	fmt.Println("the first leader's late write: refused (a newer term has written)")
	v, _, err := store.Get(ctx, key, last)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the key holds:", v)
	stopWatching()
	watched.Wait()
}
