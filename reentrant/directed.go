package reentrant

import (
	"context"
	"strconv"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/directed"
	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// Directed wakes: relock's addition to Redisson's protocol for plain and
// fenced locks (docs/waiting.md). A release publishes "0" on Redisson's
// channel, and every client listening there wakes one of its waiters: with
// n clients waiting, n attempts for one free lock. So relock clients listen
// on a channel of their own instead, and register in the lock's waiters'
// set when an attempt fails (in that same script); a relock release, besides
// publishing for Redisson's waiters, tells the client registered longest.
// Nothing depends on the message: the re-poll bound holds as before.
//
//   - A message that reaches no one is known at once: the script sees that
//     nobody heard it (PUBLISH's count), drops that client and tells the next.
//   - A message that reaches a client with no waiter left to take it is
//     passed on by that client (directed.Handoffs.PassOn).
//   - A client whose waiter takes the lock moves to the end of the set if it
//     has other waiters, and leaves it if not.
//   - Releases by anything else (Java Redisson's unlock or forceUnlock, an
//     older relock, a deleted key's holder) publish only on Redisson's
//     channel, so every waiting client listens there too. A relock release
//     marks its message there as told (pubsub.WakeTold, which Java reads as
//     0), and relock waiters let it pass: only the client it told wakes.
//   - So a release whose message nobody heard on Redisson's channel has
//     nobody to tell directly, and does not look: each waiting client
//     subscribed there before its last look at the lock.
//
// The scripts must be able to count who hears a channel: so not with
// classic pub/sub on a cluster, where a subscriber may sit on any node and
// PUBLISH counts only its own; there every waiter listens on Redisson's
// channel, as Redisson's do.

// directedWakes is the waker of a plain, fenced or non-reentrant lock on a
// client whose scripts can count who hears a channel (Client.directed):
// directed wakes, and, where the kind's releases hand the lock on (a plain
// lock's: kind.handsOn), handoffs. Its state for a call is the cycle's
// directed.Wait; the client's side, the offers and what keeps them right,
// is directed.Handoffs.
type directedWakes struct{ quiet }

// begin sets up the wait's directed wakes. A channel still live (another
// waiter's, or lingering after one) is joined before the first attempt: a
// release after that attempt registered the client is heard, so a failed
// attempt needs no second one after subscribing.
func (directedWakes) begin(c *cycle) {
	l, offers := c.l, c.l.row.handsOn
	c.directed = directed.NewWait(&l.c.handoffs, l.name, c.cfg.wait != 0, offers, offers && c.takesWhatIsGiven())
	c.announcedOn("", pubsub.LockWakes, l.name) // named when needed: wakeChannel
	if c.cfg.wait == 0 || l.c.sub.Idle() {
		return
	}
	if s := l.c.sub.Join(c.wakeChannel()); s != nil {
		c.sub, c.subscribe = s, false
	}
	if s := l.c.sub.Join(scripts.LockChannel(l.name)); s != nil {
		c.also = s
	}
}

// given takes the hold a release handed to the client's offer since the
// wait's last attempt.
func (w directedWakes) given(c *cycle) (outcome, bool) {
	if c.sub == nil {
		return outcome{}, false
	}
	if n := c.sub.TakeGiven(); n != 0 && w.take(c, n) {
		return outcome{taken: true}, true
	}
	return outcome{}, false
}

// args sets the attempt's directed-wake arguments.
func (directedWakes) args(c *cycle, a scripts.Acquire) scripts.Acquire {
	c.dropped = c.l.c.handoffs.Drops.Mark()
	a.Wake = c.directed.Args(c.sub, c.last.n, a.Lease)
	if hook := c.l.c.hookBeforeSend; hook != nil {
		hook()
	}
	return a
}

// answered takes the hold an attempt found handed to the offer it wrote.
func (w directedWakes) answered(c *cycle, r lockAttempt) (lockAttempt, bool) {
	if !r.Handed {
		return r, false
	}
	if w.take(c, c.directed.Handed()) {
		return r, true
	}
	// Another waiter of this client took it: the lock is held.
	r.OK, r.Handed, r.PTTL = false, false, -1
	return r, false
}

// blocked follows an attempt that did not take the lock: the wait's
// channel is named and the wait counted among its client's offer's. One
// that found the lock held registered the client if the call waits, and
// the wait listens on Redisson's channel too, for releases that tell no
// relock client directly (a Java holder's, an operator's forceUnlock from
// Java, a key deleted).
func (directedWakes) blocked(c *cycle, r lockAttempt) error {
	c.wakeChannel() // a pause after it may subscribe
	c.directed.Failed()
	if r.err == nil {
		c.directed.FoundHolder()
		c.listenAlso(scripts.LockChannel(c.l.name))
	}
	return nil
}

func (directedWakes) won(c *cycle)                              { c.directed.Nudge(c.sub) }
func (directedWakes) end(c *cycle, sub *pubsub.Waiter, _ error) { c.directed.End(sub) }

// sending counts an attempt that takes the client out of the waiters' set
// if it wins as a drop (see waitstate.Drops), and records, with the reply,
// what became of the offer it wrote.
func (directedWakes) sending(t lockTry) func(lockAttempt) {
	wake, l := t.acq.Wake, t.l
	o := waitstate.Offer{N: wake.OfferFirst, Last: wake.OfferLast}
	if o.N == 0 && wake.Settle != scripts.SettleDrop {
		return sent
	}
	done := nothing
	if wake.Settle == scripts.SettleDrop {
		done = l.c.handoffs.Drops.Sending()
	}
	return func(r lockAttempt) {
		switch {
		case o.N == 0, r.Handed: // none, or taken by the cycle, or given back by undo
		case r.OK && wake.Settle == scripts.SettleDrop:
			l.c.names.Withdrawn(l.name, o) // with the client, by the win
		default:
			// A failure offered o; a lost reply may have.
			l.c.names.Done(l.name, o, !r.OK)
		}
		done()
	}
}

// undo gives a hold handed to the attempt's offer back, or undoes the
// attempt's own.
func (directedWakes) undo(ctx context.Context, t lockTry, r lockAttempt) {
	if r.Handed {
		t.l.c.handoffs.TakeBack(t.l.name, t.acq.Wake.OfferFirst)
		return
	}
	t.undoHold(ctx, r)
}

// take takes the hold a release gave this client's offer n, if it is the
// offer's and the call takes handoffs: the cycle's owner becomes the
// offer's (its own was made for the call, so nothing else knows it). A
// wait that does not take handoffs gives the hold back (see
// directed.Handoffs.TakeBack). It reports false when the cycle goes on.
func (directedWakes) take(c *cycle, n int64) bool {
	sent, lease, ok := c.directed.Take(n)
	if !ok {
		// Taken by another wait here (a message and an attempt may both
		// name it), or withdrawn, whose give-back releases it.
		return false
	}
	var buf [20]byte
	c.owner = Owner{id: c.l.c.id + ":" + string(strconv.AppendInt(buf[:0], n, 10))}
	c.key = c.l.key(c.owner)
	c.ctx = WithOwner(c.ctx, c.owner)
	c.last.at, c.last.ttl, c.last.token = sent, lease, 0
	// The release moved the client to the end of the waiters' set. If it
	// has no waiter left, its release of this hold drops it while it still
	// listens on Redisson's channel (see directed.Handoffs.OwnOffer): no release but
	// that one can come first. After a longer hold, a later release finds
	// nobody listening on its wake channel, and drops it then.
	return true
}

// wakeChannel names the channel of the cycle's directed wakes, once: only
// a cycle that may wait on it pays for the name.
func (c *cycle) wakeChannel() string {
	if c.channel == "" {
		c.channel = scripts.WakeChannel(c.l.name, c.l.c.id)
	}
	return c.channel
}
