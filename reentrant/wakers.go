package reentrant

import (
	"context"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// The wakers that most others build on (see waker): quiet, whose every
// point does nothing, and the two that add only a channel or a pace.

// quiet is the waker of a wait that hears nothing: the points where a
// waker does nothing, which every other embeds. Its waits sleep to the
// holder's TTL or the re-poll interval.
type quiet struct{}

func (quiet) begin(*cycle)                                         {}
func (quiet) given(*cycle) (outcome, bool)                         { return outcome{}, false }
func (quiet) args(_ *cycle, a scripts.Acquire) scripts.Acquire     { return a }
func (quiet) answered(_ *cycle, r lockAttempt) (lockAttempt, bool) { return r, false }
func (quiet) blocked(*cycle, lockAttempt) error                    { return nil }
func (quiet) won(*cycle)                                           {}
func (quiet) sleep(c *cycle, pttl time.Duration) time.Duration     { return c.bounded(pttl) }
func (quiet) end(*cycle, *pubsub.Waiter, error)                    {}
func (quiet) sending(lockTry) func(lockAttempt)                    { return sent }
func (quiet) undo(ctx context.Context, t lockTry, r lockAttempt)   { t.undoHold(ctx, r) }
func (quiet) polling() waker                                       { return retrying{} }

// announced is the waker of a lock whose releases publish on its kind's
// channel for the waiting owner (a read-write lock's; RLock's on a client
// without directed wakes).
type announced struct{ quiet }

func (announced) begin(c *cycle) { c.announcedOn(c.l.channel(c.owner), pubsub.LockWakes, "") }

// retrying is the waker of a call with a retry delay: it polls at that
// pace, whatever the lock's kind.
type retrying struct{ quiet }

func (retrying) sleep(c *cycle, _ time.Duration) time.Duration { return c.cfg.retryDelay }

// bounded is the pause after an attempt that found the lock held with
// pttl left: until the hold ends, or the re-poll interval.
func (c *cycle) bounded(pttl time.Duration) time.Duration {
	if d := c.l.c.opts.RepollInterval; pttl < 0 || pttl >= d {
		return d
	}
	return pttl
}
