package reentrant

import (
	"time"

	"github.com/relock-go/relock/reentrant/internal/retry"
)

// Backoff bounds a spin lock's waits: the first is about Min, each next one
// doubles, up to Max, and each is drawn with jitter from the upper half of
// that bound, so that spinning waiters drift apart.
type Backoff struct {
	Min, Max time.Duration
}

// next returns the wait after one of bound prev (0 before the first).
func (b *Backoff) next(prev time.Duration) time.Duration {
	return retry.Jittered(retry.Doubled(prev, b.Min, b.Max))
}
