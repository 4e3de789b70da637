package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/errtext"
	"github.com/relock-go/relock/scripts"
)

// ResignOption says whom a Resign or a RequestResign hands leadership to.
type ResignOption func(*successor)

// successor is whom leadership goes to: "" for whoever the release wakes
// first, "*" for the candidate standing longest, or an owner.
type successor struct{ owner string }

// To hands leadership to the candidate whose owner is owner (a
// Candidate's Owner, a reentrant.Owner as text): the lock goes to it
// directly, kept for it for up to two seconds, and it leads within one
// wake-up, in a larger term; if its Campaign ends before it takes the
// lock, the lock is free at once and the waiters are woken. If owner does
// not stand when the leader resigns (it died meanwhile, its Campaign
// ended), leadership goes to the candidate standing longest instead, as
// with ToNext. The leader stops standing in the same step.
func To(owner string) ResignOption {
	return func(s *successor) { s.owner = owner }
}

// ToNext hands leadership to the candidate that has stood longest, other
// than the leader, as To does; with no other candidate, the lock is
// released as by a plain Resign. A rolling deploy's leader resigns so on
// SIGTERM.
func ToNext() ResignOption {
	return func(s *successor) { s.owner = "*" }
}

// handoverWindow is how long a handed-over lock waits for its successor
// before it expires and the next waiter takes it: its wake and one
// attempt, with room for a busy machine.
const handoverWindow = 2 * time.Second

// handOver resigns l by giving the election's lock to to ("*": the
// candidate standing longest): the record is cleared and the lock moved
// in one script, in place of Unlock's release.
func (e *Election) handOver(l *leadership, to string) error {
	var did scripts.HandedOver
	err := e.rt.GiveAway(l.held, func(ctx context.Context, key, owner string, restore time.Duration) error {
		var err error
		did, _, err = scripts.ElectionHandOver(ctx, e.rt.Conn(), key, owner, l.reg(), int64(l.term), to, handoverWindow, restore, e.rt.Publish)
		switch {
		case err != nil:
			return e.fail("hand over", err)
		case did == scripts.HandOverNotHeld:
			return fmt.Errorf("relock: election %q: resign: %w: the leader's hold was gone", e.Name(), reentrant.ErrLockLost)
		}
		return nil
	})
	return err
}

// RequestResign asks the election's leader, from any Client, to resign,
// handing over as opts say (to the candidate standing longest by
// default, so that the leader does not win its own next campaign). The
// leader's leading context ends with a cause wrapping ErrResignRequested
// within a message's delivery; it resigns once its work has stopped, Run
// at once. It returns the leader asked, or ErrNoLeader when nobody leads,
// ErrNotCandidate when To names no live candidate or the leader itself;
// a Redis user without write rights on the election's keys is refused
// with reentrant.ErrNoPermission. A leader that never looks at its
// leading context is not made to stop.
func (e *Election) RequestResign(ctx context.Context, opts ...ResignOption) (Leader, error) {
	if err := e.check(ctx); err != nil {
		return Leader{}, err
	}
	s := successor{owner: "*"}
	for _, o := range opts {
		o(&s)
	}
	found, term, leader, err := scripts.ElectionRequest(ctx, e.rt.Conn(), e.lock.Key(), s.owner, e.rt.Publish)
	switch {
	case scripts.IsNoPermission(err):
		return Leader{}, fmt.Errorf("relock: election %q: request to resign: %w: the Redis user may not write the election's record (%w)", e.Name(), reentrant.ErrNoPermission, scripts.Tidy(err))
	case err != nil:
		return Leader{}, e.fail("request to resign", err)
	case found == scripts.NoLeader:
		return Leader{}, fmt.Errorf("relock: election %q: request to resign: %w", e.Name(), ErrNoLeader)
	case found == scripts.NotCandidate:
		return Leader{}, fmt.Errorf("relock: election %q: request to resign: %w: %s", e.Name(), ErrNotCandidate, s.owner)
	case found == scripts.IsLeader:
		return Leader{}, fmt.Errorf("relock: election %q: request to resign: %w: %s is the leader", e.Name(), ErrNotCandidate, s.owner)
	}
	return Leader{Owner: leader, Term: Term(term)}, nil
}

// Resign ends leading's leadership at once: the record says nobody leads,
// observers are told, and the lock is released, which wakes the next
// candidate; with To or ToNext, or after a RequestResign (which named
// the successor), the lock goes to that candidate directly instead. It
// fails with ErrNotLeader when leading does not lead this election (it
// never did, or resigned already), and with an error wrapping
// reentrant.ErrLockLost or reentrant.ErrStalled when the leadership had
// ended before (work done after that was not protected); the leading
// context is then cancelled with that cause. The Campaign's candidate
// leaves the list before Resign returns.
func (e *Election) Resign(leading context.Context, opts ...ResignOption) error {
	if err := e.check(leading); err != nil {
		return err
	}
	l, err := e.leadingOf(leading)
	if err != nil {
		return err
	}
	if !l.resigned.CompareAndSwap(false, true) {
		return fmt.Errorf("relock: election %q: %w: resigned already", e.Name(), ErrNotLeader)
	}
	defer l.cand.leave()
	var s successor
	if to := l.requested.Load(); to != nil {
		s.owner = *to
	}
	for _, o := range opts {
		o(&s)
	}
	var rerr error
	if s.owner != "" {
		err = e.handOver(l, s.owner)
	} else {
		// The record first: an observer that sees the lock free and reads
		// the record must not find this leader in it. A failure here is
		// told by the Unlock after: the record names an owner that holds
		// nothing then, which Leader reads as no leader.
		_, rerr = scripts.ElectionResign(context.WithoutCancel(leading), e.rt.Conn(), l.key, l.owner, l.reg(), int64(l.term), e.rt.Publish)
		err = e.lock.Unlock(l.held)
	}
	l.resign(err)
	if err != nil {
		if cause := context.Cause(l.held); errors.Is(cause, reentrant.ErrStalled) {
			// Given back when it stalled: the error says so, not the
			// Unlock that found nothing left to give back.
			return errtext.Wrap(fmt.Sprintf("relock: election %q", e.Name()), cause)
		}
		return err
	}
	if rerr != nil {
		// The lock was released: leadership has ended, only the record
		// could not say so (Leader reads it as no leader all the same).
		return e.fail("resigned, but clearing the leader's record failed", rerr)
	}
	return nil
}
