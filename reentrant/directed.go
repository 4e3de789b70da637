package reentrant

import (
	"time"

	"github.com/relock-go/relock/pubsub"
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
//     passed on by that client (passOn).
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

// passOn hands on a directed wake for lock name that found no waiter of c
// to take it (see scripts.PassOn), which takes c out of the lock's waiters'
// set. A waiter of c that joined the wake channel meanwhile may have made
// its attempt, which left c registered, before the pass-on ran (the two go
// out on different connections): it would sleep unregistered. So, once the
// pass-on has run, a waiter of c's is nudged to try again, which registers
// c anew. It does not block.
func (h *handoffs) passOn(name string) func() {
	return func() {
		h.background(func() {
			ctx, cancel := cleanup(h.closing)
			defer cancel()
			// A drop, as a win's SettleDrop (see waitstate.Drops).
			defer h.drops.Sending()()
			if err := scripts.PassOn(ctx, h.runner.conn(), name, h.id, h.publish, h.listensFor(name)); err != nil {
				h.log.Debug("relock: passing on a wake", "lock", name, "error", err)
			}
			h.sub.Nudge(scripts.WakeChannel(name, h.id))
		})
	}
}

// listensFor is how long at least c will still listen on lock name's
// Redisson channel, counted from now (see scripts.Offer.Listens): 0 when
// it does not, and never less than a millisecond when it does, a
// subscription being unsubscribed included (a release may count it yet).
// A client that stops waiting stays in the lock's waiters' set for that
// long, as a mark, so that a release counts it among the listeners that
// are not Java waiters.
func (h *handoffs) listensFor(name string) time.Duration {
	if h.sub.Idle() { // the uncontended path: no channel name built
		return 0
	}
	d, subscribed := h.sub.ListensFor(scripts.LockChannel(name))
	if !subscribed {
		return 0
	}
	return max(d, time.Millisecond)
}

// directedWait is one wait's part in directed wakes, and, for a wait that
// takes handoffs, in its client's offer (offers.go). The cycle calls it at
// fixed points: for a hold a release handed over (take), with each
// attempt's arguments (args), after an attempt that failed (failed) or
// found the lock held (foundHolder), after a win (nudge), and at the end
// (end). The zero directedWait is off: the lock polls, or wakes another
// way.
type directedWait struct {
	on   bool
	h    *handoffs
	name string
	// waits: the call waits, so a failed attempt registers the client;
	// offers: the kind's releases hand the lock on (kind.handsOn).
	waits, offers bool
	// registered: an attempt of this wait put the client in the waiters'
	// set; dropping: the last attempt takes the client out of it if it
	// wins.
	registered, dropping bool
	// handoff: the wait takes a plain lock straight from a release, as its
	// client's offer; joined: it is counted among the offer's waits, from
	// its first attempt that offers or fails (an uncontended Lock never
	// is); handed: the attempt in flight offered that owner number.
	handoff, joined bool
	handed          int64
}

// handedOver returns the offer number a release handed to this wait's
// client since its last attempt, taken from sub; 0 for none.
func (d *directedWait) handedOver(sub *pubsub.Waiter) int64 {
	if !d.on || sub == nil {
		return 0
	}
	return sub.TakeGrant()
}

// take takes the hold a release gave the client's offer n, if n is the
// offer's and the wait takes handoffs; one it does not take goes back
// (handoffs.takeBack). It returns when the hold's TTL is known to last
// from, and how long.
func (d *directedWait) take(n int64) (sent time.Time, lease time.Duration, ok bool) {
	if !d.handoff {
		d.h.takeBack(d.name, n)
		return time.Time{}, 0, false
	}
	sent, lease, ok = d.h.names.Take(d.name, n)
	if ok {
		d.dropping = false
	}
	return sent, lease, ok
}

// args returns the directed-wake part of attempt number tries, which asks
// for a hold of ttl; sub is the wait's channel, if it has joined one.
func (d *directedWait) args(sub *pubsub.Waiter, tries int, ttl time.Duration) scripts.Wake {
	w := scripts.Wake{Client: d.h.id, Settle: scripts.SettleKeep, Offers: d.offers}
	if d.waits {
		w.Register = d.h.keep
	}
	if d.registered {
		w.Settle = scripts.SettleDrop
		if sub != nil && !sub.Alone() {
			w.Settle = scripts.SettleRequeue
		} else if w.Offers {
			w.Listens = d.h.listensFor(d.name)
		}
	}
	d.dropping = w.Settle == scripts.SettleDrop
	if d.handoff && (tries > 1 || sub != nil) {
		// Not with a first attempt that found no channel live: it most
		// likely takes a free lock, and one that fails is followed at
		// once by one after subscribing.
		d.join()
		var old int64
		w.Grant, old = d.h.names.Next(d.name, ttl, d.h.owners)
		d.h.giveBack(d.name, old)
	}
	d.handed = w.Grant
	return w
}

// join counts the wait among its client's offer's waits, once.
func (d *directedWait) join() {
	if !d.joined {
		d.h.names.Join(d.name)
		d.joined = true
	}
}

// failed follows an attempt that did not take the lock: the pause after
// it may leave this wait to its client's wake, with no attempt of its own
// to come (see waiting.recheck), so it is counted now among the offer's
// waits, which keeps its client's releases offering for it.
func (d *directedWait) failed() {
	if d.handoff {
		d.join()
	}
}

// foundHolder notes that an attempt found the lock held: the client is
// registered if the call waits.
func (d *directedWait) foundHolder() {
	d.registered = d.registered || d.waits
}

// nudge follows a win whose attempt took the client out of the lock's
// waiters' set (SettleDrop: its waiter was alone on the wake channel when
// the attempt was made). A waiter of this client that joined the channel
// after that, and made its own attempt before the win ran, registered
// nothing (the client was still in the set), so it sleeps unregistered: no
// release tells it, and it waits out its timer, the holder's TTL or the
// re-poll interval. A wake passed to it makes it try again, which registers
// the client anew. A waiter that joins after this check needs none: its
// attempt after joining runs after the win.
func (d *directedWait) nudge(sub *pubsub.Waiter) {
	if d.dropping && sub != nil && !sub.Alone() {
		sub.PassOn()
	}
}

// end follows the wait's end. A handoff that came to sub after the wait
// left is given back, and the wait leaves its client's offer, the last to
// leave giving the offer back.
func (d *directedWait) end(sub *pubsub.Waiter) {
	if d.on && sub != nil {
		if n := sub.TakeGrant(); n != 0 {
			d.h.takeBack(d.name, n)
		}
	}
	if d.joined {
		d.h.giveBack(d.name, d.h.names.Leave(d.name))
		d.h.names.Ended()
	}
}
