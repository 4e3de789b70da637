package scripts_test

import (
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

// recv is a test's wait for a message, bounded (see redistest.Within): a
// failure names its line in seconds.
func recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	return redistest.Recv(t, ch)
}
