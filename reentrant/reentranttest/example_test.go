package reentranttest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/reentranttest"
)

// nightlyReport is the code under test: the report must never run twice
// at once, whichever process starts it.
func nightlyReport(ctx context.Context, locks *reentrant.Client, report func()) error {
	return locks.Do(ctx, "nightly-report", func(ctx context.Context) error {
		report()
		return nil
	}, reentrant.WaitAtMost(10*time.Second))
}

// A test to copy: two Clients, as two processes would have, on one
// embedded Redis; eight runs of the report, never two at once.
func TestNightlyReportRunsAlone(t *testing.T) {
	first, m := reentranttest.New(t, reentrant.Options{})
	second, err := reentrant.New(reentranttest.Rueidis(t, m), reentrant.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })

	var running, most atomic.Int32
	report := func() {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond) // gives an overlap the chance to show
		running.Add(-1)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		locks := first
		if i%2 == 1 {
			locks = second
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nightlyReport(context.Background(), locks, report); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d reports ran at once", most.Load())
	}
}

// Losing a lock: the server loses the key (here, deleted), and the held
// context is cancelled with ErrLockLost at the next renewal.
func TestLockLost(t *testing.T) {
	locks, m := reentranttest.New(t, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond})
	held, err := locks.Lock("job").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m.Del("job")
	<-held.Done()
	if !errors.Is(context.Cause(held), reentrant.ErrLockLost) {
		t.Fatalf("cause %v", context.Cause(held))
	}
}

// A test whose code takes two locks, always in the same order, under the
// lock-order check (docs/testing.md).
func TestTransferKeepsLockOrder(t *testing.T) {
	locks, _ := reentranttest.New(t, reentrant.Options{Hooks: reentranttest.LockOrder(t)})
	ctx := context.Background()
	for range 2 {
		from, err := locks.Lock("account:1").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		to, err := locks.Lock("account:2").Lock(from)
		if err != nil {
			t.Fatal(err)
		}
		locks.Lock("account:2").Unlock(to)
		locks.Lock("account:1").Unlock(from)
	}
}

// exportAll is code under test: it exports rows under the lock "export",
// and must stop as soon as the lock is lost, with the loss as its error.
func exportAll(ctx context.Context, locks *reentrant.Client) error {
	return locks.Do(ctx, "export", func(ctx context.Context) error {
		for {
			if ctx.Err() != nil {
				return context.Cause(ctx) // the bug to catch: leaving this out
			}
			time.Sleep(time.Millisecond) // one row
		}
	})
}

// A test to copy: the job's lock vanishes, as its expiry would, and the
// job must stop, told why. A job that ignores its held context fails it.
func TestExportStopsWhenItsLockIsLost(t *testing.T) {
	locks, m := reentranttest.New(t, reentrant.Options{WatchdogTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- exportAll(context.Background(), locks) }()
	for !m.Exists("export") {
		time.Sleep(time.Millisecond)
	}
	reentranttest.Vanish(m, "export")
	select {
	case err := <-done:
		if !errors.Is(err, reentrant.ErrLockLost) {
			t.Fatalf("the export ended with %v", err)
		}
	case <-time.After(2 * time.Second): // lost within 100ms
		t.Fatal("the export went on after its lock was lost")
	}
}
