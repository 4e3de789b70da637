package reentrant_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/relock-go/relock/reentrant"
)

// The package overview's snippets (doc.go), compiled and run here;
// TestDocSnippets checks that the overview still shows this very code.

func handle(ctx context.Context, locks *reentrant.Client) error {
	mu := locks.Lock("order:42")
	held, err := mu.Lock(ctx) // blocks until held, or ctx ends
	if err != nil {
		return err
	}
	defer mu.Unlock(held) // the context Lock returned, not ctx
	return charge(held)   // held is cancelled if the lock is lost
}

func tryHandle(ctx context.Context, locks *reentrant.Client) error {
	mu := locks.Lock("order:42")
	held, ok, err := mu.TryLock(ctx, reentrant.WaitAtMost(time.Second))
	switch {
	case err != nil:
		return err // Redis could not be reached, or refused
	case !ok:
		return errBusy // another held it for all of a second
	}
	defer mu.Unlock(held)
	return charge(held)
}

func nightlyReport(ctx context.Context, locks *reentrant.Client) error {
	return locks.Do(ctx, "nightly-report", func(ctx context.Context) error {
		return report(ctx) // ctx is cancelled if the lock is lost
	})
}

func charge(ctx context.Context) error {
	if _, ok := reentrant.LeaseDeadline(ctx); !ok {
		return fmt.Errorf("charge: ctx is not a held context")
	}
	fmt.Println("charged under the lock")
	return nil
}

func report(ctx context.Context) error {
	if _, ok := reentrant.LeaseDeadline(ctx); !ok {
		return fmt.Errorf("report: ctx is not a held context")
	}
	fmt.Println("reported under the lock")
	return nil
}

// The overview's handlers, on an embedded Redis.
func Example_overview() {
	rdb, stop := exampleRedis()
	defer stop()
	locks, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	ctx := context.Background()
	for _, h := range []func(context.Context, *reentrant.Client) error{handle, tryHandle, nightlyReport} {
		if err := h(ctx, locks); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// charged under the lock
	// charged under the lock
	// reported under the lock
}
