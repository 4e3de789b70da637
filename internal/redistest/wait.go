package redistest

import (
	"sync"
	"testing"
	"time"
)

// Within bounds every wait of Recv and Wait: far longer than anything a
// passing test waits for on a loaded machine, far shorter than the
// package's timeout, so that a wait for something that never happens
// fails in seconds at its own line rather than at the timeout with every
// goroutine's stack.
const Within = 30 * time.Second

// Recv returns the next value from ch. If none comes within Within, it
// fails the test at the caller's line.
func Recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Within):
		t.Fatalf("redistest: nothing came within %v", Within)
		var zero T
		return zero
	}
}

// Wait waits for wg. If its goroutines are still running after Within, it
// fails the test at the caller's line (and leaves them running).
func Wait(t testing.TB, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(Within):
		t.Fatalf("redistest: goroutines still running after %v", Within)
	}
}
