package redistest

import (
	"bytes"
	"runtime"
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

// Goroutines waits until exactly n goroutines' stacks match (each given
// as its lines, the first "goroutine N [state]:"): a test's way to know
// its calls have reached a point inside the library, such as asleep in a
// wait or queued behind a call in flight, without a sleep. It fails the
// test after 10s, logging the stacks of the goroutines in a relock call.
func Goroutines(t testing.TB, what string, n int, match func(stack [][]byte) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	all := make([]byte, 1<<20) // one buffer for every look: the loop spins
	for {
		buf := all[:runtime.Stack(all, true)]
		got := 0
		for _, g := range bytes.Split(buf, []byte("\n\n")) {
			if match(bytes.Split(g, []byte("\n"))) {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			for _, g := range bytes.Split(buf, []byte("\n\n")) {
				if bytes.Contains(g, []byte("relock/reentrant.")) {
					t.Logf("%s", g)
				}
			}
			t.Fatalf("redistest: %s: %d goroutines, want %d", what, got, n)
		}
		runtime.Gosched()
	}
}
