package reentrant

import "time"

// Redisson's spin lock backs off from 1ms to 128ms by default.
const (
	defaultSpinMin = time.Millisecond
	defaultSpinMax = 128 * time.Millisecond
)

// SpinLock returns a handle on the reentrant lock name that waits like
// Redisson's spin lock: it never subscribes, but retries with exponential
// backoff and jitter within b (zero fields take Redisson's 1ms and 128ms; a
// Max below Min is raised to Min), and its releases publish nothing. It shares the RLock layout, so spin and
// ordinary handles on one name exclude each other; ordinary waiters notice a
// spin release by their re-poll bound.
func (c *Client) SpinLock(name string, b Backoff) *Lock {
	if b.Min <= 0 {
		b.Min = defaultSpinMin
	}
	if b.Max <= 0 {
		b.Max = defaultSpinMax
	}
	b.Max = max(b.Max, b.Min)
	l := c.newLock(name, spinLock)
	l.spin = b
	return l
}
