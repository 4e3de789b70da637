package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/scripts"
)

// What the synchronizers (Semaphore, PermitExpirableSemaphore,
// CountDownLatch, RateLimiter) share: checking a handle, and undoing a
// change replicas did not confirm.

// checkHandle returns the first reason a synchronizer handle on name, of
// client c, cannot be used with ctx. braced says whether the name's own
// braces are kept in its channel (a latch's channel wraps the name in
// braces again, so on a cluster its name may have none).
func checkHandle(c *Client, ctx context.Context, what, name string, braced bool) error {
	switch {
	case !c.usable():
		return fmt.Errorf("relock: %w: %s %q comes from a nil handle, a nil Client or one not made by New", ErrInvalidArgument, what, name)
	case ctx == nil:
		return fmt.Errorf("relock: %w: nil context", ErrInvalidArgument)
	case name == "":
		return fmt.Errorf("relock: %w: empty %s name", ErrInvalidArgument, what)
	case c.cluster && !braced && strings.Contains(name, "{"):
		return fmt.Errorf("relock: %w: %s name %q has a \"{\", so its channel would fall in another cluster slot", ErrInvalidArgument, what, name)
	case c.cluster && !scripts.SlotSafe(name):
		return fmt.Errorf("relock: %w: %s name %q has a \"{\" but no non-empty hash tag, so its other keys would fall in another cluster slot", ErrInvalidArgument, what, name)
	}
	return c.checkOpen()
}

// confirm handles the replica sync of a change that was made: nil when
// replicas confirmed it, or when the server refuses WAIT and sync is not
// required (sync turns off). Otherwise the change is undone, as Redisson's
// handleNoSync does, and the error wraps ErrNotSynced or
// ErrSyncUnavailable.
func (c *Client) confirm(ctx context.Context, what, name string, syncErr error, undo func(context.Context) error) error {
	if syncErr == nil {
		return nil
	}
	if errors.Is(syncErr, scripts.ErrSyncRefused) && c.runner.Refused(syncErr) == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
	defer cancel()
	if err := undo(ctx); err != nil {
		c.opts.Logger.Warn("relock: undoing a change replicas did not confirm", what, name, "error", err)
	}
	if errors.Is(syncErr, scripts.ErrSyncRefused) {
		return fmt.Errorf("relock: %w (%v)", ErrSyncUnavailable, syncErr)
	}
	return fmt.Errorf("relock: %s %q: %w; undone", what, name, syncErr)
}

// checkCount returns an ErrInvalidArgument error when n is below least.
func checkCount(what string, n, least int64) error {
	if n < least {
		return fmt.Errorf("relock: %w: %s %d is below %d", ErrInvalidArgument, what, n, least)
	}
	return nil
}

// untilRun runs change, a script that must not run twice, again for as long
// as it surely did not run (notRun: the server could not run scripts, or
// could not be dialled), backing off, for up to the release window, or
// until ctx ends or the Client closes. Any other outcome, a lost reply
// included, is returned as it is.
func (c *Client) untilRun(ctx context.Context, name string, change func(context.Context) error) error {
	ctx, cancel := cleanup(ctx)
	defer cancel()
	var err error
	_ = retry.Until(untilRunBackoff, retry.Sleep(ctx, c.done), func(int) retry.Outcome {
		if err = change(ctx); err == nil || !notRun(err) || c.checkOpen() != nil {
			return retry.Done
		}
		return pacing(err)
	})
	return err // a pause cut short returns the last try's error
}

// untilRunBackoff paces untilRun.
var untilRunBackoff = retry.Backoff{First: 20 * time.Millisecond, Max: time.Second}

// changeError is the error of a change to synchronizer name: nil, or err as
// this package's (see redisError). A change replicas did not confirm is
// kept and reported: it gave or counted something that cannot be taken
// back safely.
func changeError(what, name string, err error) error {
	if err == nil {
		return nil
	}
	return redisError(what, name, err)
}
