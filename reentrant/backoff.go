package reentrant

import (
	"math/rand/v2"
	"time"
)

// doubled is every backoff's step: twice prev, at least lo, at most hi.
func doubled(prev, lo, hi time.Duration) time.Duration {
	return min(max(2*prev, lo), hi)
}

// jittered draws a wait from the upper half of bound, so that callers
// backing off together drift apart.
func jittered(bound time.Duration) time.Duration {
	return bound/2 + rand.N(bound/2+1)
}

// Backoff bounds a spin lock's waits: the first is about Min, each next one
// doubles, up to Max, and each is drawn with jitter from the upper half of
// that bound, so that spinning waiters drift apart.
type Backoff struct {
	Min, Max time.Duration
}

// next returns the wait after one of bound prev (0 before the first).
func (b *Backoff) next(prev time.Duration) time.Duration {
	return jittered(doubled(prev, b.Min, b.Max))
}
