package reentrant

import "time"

// Redisson's spin lock backs off from 1ms to 128ms by default.
const (
	defaultSpinMin = time.Millisecond
	defaultSpinMax = 128 * time.Millisecond
)
