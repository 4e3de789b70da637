package reentrant

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// lockAt returns a plain lock on key as it is, with no NameMapper: an
// add-on's key derived from one the mapper made already (addon.LockAt).
func lockAt(c *Client, key string) any {
	l := c.newLock(key, plainLock)
	l.r.name = key
	return l
}

// giveAway ends the hold behind held in this client without its release:
// pass moves the lock on in Redis instead (addon.GiveAway). The hold
// leaves the table first, as for Unlock, so no renewal in flight finds the
// owner's field gone and calls the hold lost; a hold that left it already
// (lost, stalled) returns why, and pass does not run.
func giveAway(c *Client, held context.Context, pass func(ctx context.Context, key, owner string, restore time.Duration) error) error {
	h, ok := held.Value(holdCtxKey{}).(*hold)
	if !ok || h.t != c.holds {
		return fmt.Errorf("relock: %w: the context is no held context of this Client", ErrNotHeld)
	}
	a, restore, _, found := c.holds.drop(h.key)
	if !found {
		if cause := c.holds.goneCause(held, h.key); cause != nil {
			return fmt.Errorf("relock: give away %q: %w", h.key.name, cause)
		}
		return fmt.Errorf("relock: give away %q: %w", h.key.name, ErrNotHeld)
	}
	start := time.Now()
	err := pass(context.WithoutCancel(held), h.key.name, h.key.owner, restore)
	var cause error
	if errors.Is(err, ErrLockLost) {
		cause = err
	}
	c.holds.ended(h.key, a, cause, err, time.Since(start))
	a.cancel(cmp.Or(cause, context.Canceled))
	return err
}
