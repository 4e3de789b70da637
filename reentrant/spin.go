package reentrant

import "time"

// Redisson's spin lock backs off from 1ms to 128ms by default.
const (
	defaultSpinMin = time.Millisecond
	defaultSpinMax = 128 * time.Millisecond
)

// spinning is the spin lock's waker: its waits never subscribe, but back
// off within the handle's Backoff (or to the holder's TTL, if sooner); its
// releases publish nothing (kind.spins).
type spinning struct{ quiet }

func (spinning) sleep(c *cycle, pttl time.Duration) time.Duration {
	c.backoff = c.l.spin.next(c.backoff)
	if pttl >= 0 && pttl < c.backoff {
		return pttl
	}
	return c.backoff
}
