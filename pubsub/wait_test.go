package pubsub_test

import (
	"sync"
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// recv and waitAll are a test's waits for a value or for goroutines,
// bounded (see redistest.Within): a failure names its line in seconds.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	return redistest.Recv(t, ch)
}

func waitAll(t testing.TB, wg *sync.WaitGroup) {
	t.Helper()
	redistest.Wait(t, wg)
}
