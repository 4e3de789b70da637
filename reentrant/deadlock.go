package reentrant

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/waitgraph"
	"github.com/relock-go/relock/scripts"
)

// Deadlock detection. An owner that holds locks and waits for another is a
// waits-for edge to each holder of that lock; owners that wait for each
// other in a cycle wait forever, since the watchdog keeps every hold alive.
// A Lock call whose ctx carries an owner (one that may hold other locks:
// an owner made for the call holds nothing, so it cannot close a cycle)
// that has waited Options.DeadlockTimeout registers its edge in Redis
// (relock_wait:{<owner>} -> "<since>:<lock>", renewed at each check) and
// then, at most once per re-poll interval, follows the edges from itself:
// the holders of the lock it waits for (read from the lock's hash), the
// lock each of them waits for (read from its edge), and so on. A cycle
// found is read again before it is believed, and one waiter in it gives
// up: the one that began waiting last (then the greatest owner id), so
// that every member that finds the cycle picks the same one. Every read is
// a single-key command, so edges and locks may live in any cluster slot.

// watchingDeadlocks is the waker of a call whose owner may close a cycle
// of waits (see Lock.wakerFor): the lock's own, with deadlock detection
// after each attempt that found the lock held. It is made per call, with
// the call's check.
type watchingDeadlocks struct {
	waker
	d *deadlockCheck
}

// watchDeadlocks returns w, watching for deadlocks. The wait's clock
// starts now, in whole milliseconds, as the edge stores it: every member
// of a cycle compares the same times when it picks the victim.
func watchDeadlocks(w waker) waker {
	return watchingDeadlocks{w, &deadlockCheck{since: time.UnixMilli(time.Now().UnixMilli())}}
}

// blocked looks for a deadlock after an attempt that was answered; its
// error, if this wait is the victim, ends the call.
func (w watchingDeadlocks) blocked(c *cycle, r lockAttempt) error {
	if err := w.waker.blocked(c, r); err != nil || r.err != nil {
		return err
	}
	return w.d.check(c.ctx, c.l.c, c.owner.id, c.l.name, c.kind == KindWrite)
}

// sleep: the first check for a deadlock comes when the wait has lasted
// DeadlockTimeout, not at the re-poll after.
func (w watchingDeadlocks) sleep(c *cycle, pttl time.Duration) time.Duration {
	d := w.waker.sleep(c, pttl)
	if until := time.Until(w.d.since.Add(c.l.c.opts.DeadlockTimeout)); until > 0 && until < d {
		d = until
	}
	return d
}

func (w watchingDeadlocks) end(c *cycle, sub *pubsub.Waiter, err error) {
	w.d.end(c.ctx, c.l.c, c.owner.id)
	w.waker.end(c, sub, err)
}

// deadlockCheck is one wait's deadlock detection, which watchingDeadlocks
// calls after each attempt that found the lock held (check) and when the
// wait ends (end).
type deadlockCheck struct {
	since      time.Time // when the wait began
	next       time.Time // the next check is not before
	registered bool      // an edge of this wait may be in Redis
	// selfChecked: a write lock's wait looked for its owner among the
	// lock's readers (see check).
	selfChecked bool
}

// check runs after an attempt of owner self's wait for lock, on client c,
// found the lock held: once the wait has lasted DeadlockTimeout, it
// registers the wait's edge and looks for a cycle through it, at most once
// per re-poll interval. It returns the error that ends the wait when this
// waiter is the cycle's victim. A write lock's (write) waiter whose owner
// holds the read side of the same lock waits for itself: that is reported
// at once. A check that cannot reach Redis finds nothing; the wait goes
// on, and reports the outage if it ends in one. ctx is the wait's.
func (d *deadlockCheck) check(ctx context.Context, c *Client, self, lock string, write bool) error {
	now := time.Now()
	if now.Before(d.next) {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, releaseWindow)
	defer cancel()
	if now.Sub(d.since) < c.opts.DeadlockTimeout {
		if !write || d.selfChecked {
			return nil
		}
		// Before the timeout, only the read-to-write self-wait, once.
		d.selfChecked = true
		holders, err := graphOf(c).Holders(rctx, lock)
		if err != nil || !slices.Contains(holders, self) {
			return nil
		}
		return victim(ctx, c, self, lock, []WaitEdge{{self, lock, self, d.since}})
	}
	d.next = now.Add(c.opts.RepollInterval)
	rdb := c.rdb
	edge := strconv.FormatInt(d.since.UnixMilli(), 10) + ":" + lock
	// Registered before it is sent: a SET whose reply is lost may have
	// run, and an edge left behind would be believed for its TTL, by
	// waiters of the locks this owner still holds, as a wait that ended.
	d.registered = true
	if err := rdb.Do(rctx, rdb.B().Set().Key(scripts.WaitEdgeKey(self)).Value(edge).Px(c.opts.markTTL()).Build()).Error(); err != nil {
		c.opts.Logger.Debug("relock: could not register a wait for deadlock detection", "lock", lock, "error", err)
		return nil
	}
	graph := graphOf(c)
	cyc := graph.Cycle(rctx, self, lock, d.since)
	if cyc == nil || !graph.StillTrue(rctx, cyc) {
		return nil
	}
	edges := make([]WaitEdge, len(cyc))
	for i, e := range cyc {
		edges[i] = WaitEdge(e)
	}
	return victim(ctx, c, self, lock, edges)
}

// victim returns the error that ends owner self's wait for lock if it is
// cyc's victim: the waiter that began waiting last, then the greatest owner
// id. cyc starts with this waiter's edge.
func victim(ctx context.Context, c *Client, self, lock string, cyc []WaitEdge) error {
	v := slices.MaxFunc(cyc, func(a, b WaitEdge) int {
		if n := a.Since.Compare(b.Since); n != 0 {
			return n
		}
		return strings.Compare(a.Waiter, b.Waiter)
	})
	if v.Waiter != self {
		return nil // the victim gives up when it checks
	}
	e := &DeadlockError{Cycle: cyc}
	if hook := c.opts.Hooks.Deadlock; hook != nil {
		hook(ctx, e)
	}
	return fmt.Errorf("relock: lock %q: %w", lock, e)
}

// end takes owner self's wait edge out of Redis when the wait ends.
func (d *deadlockCheck) end(ctx context.Context, c *Client, self string) {
	if !d.registered {
		return
	}
	ctx, cancel := cleanup(ctx)
	defer cancel()
	rdb := c.rdb
	_ = rdb.Do(ctx, rdb.B().Del().Key(scripts.WaitEdgeKey(self)).Build()).Error()
}

// WaitsFor reads owner's registered wait, as deadlock detection sees it:
// one edge to each holder of the lock owner waits for, or none when owner
// has no wait registered (it waits for less than DeadlockTimeout, waits as
// an owner made for its call, or does not wait). It changes nothing. The
// relock command's deadlocks subcommand is built on it.
func (c *Client) WaitsFor(ctx context.Context, owner string) ([]WaitEdge, error) {
	switch {
	case !c.usable() || ctx == nil:
		return nil, fmt.Errorf("relock: %w: WaitsFor needs a Client from New and a ctx", ErrInvalidArgument)
	case c.checkOpen() != nil:
		return nil, fmt.Errorf("relock: waits of %q: %w", owner, ErrClosed)
	}
	graph := graphOf(c)
	lock, since, ok, err := graph.WaitOf(ctx, owner)
	if err != nil {
		return nil, redisError("lock", owner, err)
	}
	if !ok {
		return nil, nil
	}
	holders, err := graph.Holders(ctx, lock)
	if err != nil {
		return nil, redisError("lock", lock, err)
	}
	edges := make([]WaitEdge, 0, len(holders))
	for _, h := range holders {
		edges = append(edges, WaitEdge{Waiter: owner, Lock: lock, Holder: h, Since: since})
	}
	return edges, nil
}

// graphOf reads c's waits-for graph (see waitgraph).
func graphOf(c *Client) waitgraph.Reader {
	return waitgraph.New(c.rdb, func(field string) (string, bool) {
		owner, _, ok := holderField(field)
		return owner, ok
	})
}
