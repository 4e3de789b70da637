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
