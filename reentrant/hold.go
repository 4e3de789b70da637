package reentrant

import (
	"context"
	"time"
)

type holdKey struct {
	name, owner string
}

// hold is this client's record of one owner's hold on one lock: one entry
// per acquisition not yet released, newest last. Holds taken elsewhere with
// the same owner (a hand-off to another process) are not here; Redis counts
// them all.
type hold struct {
	key  holdKey
	acqs []acquisition
}

type acquisition struct {
	lease  time.Duration // 0: kept by the watchdog
	cancel context.CancelCauseFunc
}

// lease returns the TTL a release restores while holds remain: the newest
// acquisition's.
func (h *hold) lease() time.Duration {
	return h.acqs[len(h.acqs)-1].lease
}

func (h *hold) cancelAll(cause error) {
	for _, a := range h.acqs {
		a.cancel(cause)
	}
}

// addHold records an acquisition and returns its held context: parent with
// a cancel that fires on release or loss.
func (c *Client) addHold(parent context.Context, key holdKey, lease time.Duration) (context.Context, error) {
	ctx, cancel := context.WithCancelCause(parent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cancel(ErrClosed)
		return nil, ErrClosed
	}
	h := c.holds[key]
	if h == nil {
		h = &hold{key: key}
		c.holds[key] = h
	}
	h.acqs = append(h.acqs, acquisition{lease: lease, cancel: cancel})
	return ctx, nil
}

// dropHold forgets the newest acquisition of key, if any, and returns it
// with the lease that the release should restore. last says whether no
// acquisition of key remains here.
func (c *Client) dropHold(key holdKey) (a acquisition, restore time.Duration, found, last bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	restore = c.opts.WatchdogTimeout
	h := c.holds[key]
	if h == nil {
		return a, restore, false, true
	}
	a = h.acqs[len(h.acqs)-1]
	h.acqs = h.acqs[:len(h.acqs)-1]
	if len(h.acqs) == 0 {
		delete(c.holds, key)
		return a, restore, true, true
	}
	if l := h.lease(); l > 0 {
		restore = l
	}
	return a, restore, true, false
}

// loseHolds cancels, with cause, every held context of the holds that match,
// and forgets those holds.
func (c *Client) loseHolds(match func(holdKey) bool, cause error) {
	c.mu.Lock()
	var lost []*hold
	for k, h := range c.holds {
		if match(k) {
			lost = append(lost, h)
			delete(c.holds, k)
		}
	}
	c.mu.Unlock()
	for _, h := range lost {
		h.cancelAll(cause)
	}
}
