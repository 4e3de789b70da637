package reentrant

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/pubsub"
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
// takes handoffs, in its client's offer (handoffs, below). The cycle calls it at
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
	return sub.TakeGiven()
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
		o, old := d.h.names.Next(d.name, ttl, d.h.owners, true)
		w.OfferFirst, w.OfferLast = o.N, o.Last
		d.h.giveBack(d.name, old)
	}
	d.handed = w.OfferFirst
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
		if n := sub.TakeGiven(); n != 0 {
			d.h.takeBack(d.name, n)
		}
	}
	if d.joined {
		d.h.giveBack(d.name, d.h.names.Leave(d.name))
		d.h.names.Ended()
	}
}

// Handoffs: a plain lock's release gives the lock to the next relock
// client in the waiters' set, instead of telling it the lock is free, so
// that the client's waiter holds it when the message comes, a round trip
// sooner, and the lock is never free between them (docs/waiting.md).
//
// The client offers, for each lock its waiters wait on, an owner made for
// the purpose ("<client-id>:<n>"): its waiters' failed attempts write the
// offer with their lease (scripts.Wake.OfferFirst), and so does the release of
// a hold of its own while it has waiters. A release gives the lock to that
// owner, and names n on the client's wake channel; the waiter woken takes
// the owner for its own. Its own owner was made for its call, so nothing
// else knows it.
//
// Each owner number is given at most once while the client stays
// registered: the scripts refuse to offer a number once given, and the
// table hands it to one waiter at most (take). An offer that no waiter will take is taken back
// (giveBack), which releases the lock if it was given meanwhile; a message
// lost with a connection is made up by the next attempt, which finds the
// lock held by the offer's owner (scripts.Acquired.Handed).

// handoffs is a client's side of directed wakes and handoffs
// (directed.go): the drops it sent, and what it sends to keep its offers
// right (give-backs, pass-ons, the offer a release writes). The offers
// themselves are in the client's per-name table. Made by New, once the
// client's channels and rights are known.
type handoffs struct {
	names   *waitstate.Table
	drops   waitstate.Drops
	id      string
	sub     *pubsub.Subscriber
	publish scripts.Publish
	runner  *scriptRunner
	owners  *atomic.Int64 // owner numbers, shared with Client.NewOwner
	// lease is an offer's (the watchdog's timeout); keep, how long a
	// release keeps the waiters' set alive (Options.markTTL).
	lease, keep time.Duration
	log         *slog.Logger
	// background and closing are the client's (Client.background).
	background func(func()) bool
	closing    context.Context
}

// giveBackAll takes back, as Close does, every handoff offer left: a
// release may have given the lock to one whose waiters ended (Close ends
// them). It waits for the waits that take handoffs to end first, then
// sends the give-backs; all within closeGiveBackWindow. A give-back that
// is not sent leaves a lock given meanwhile to its TTL.
func (h *handoffs) giveBackAll() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.closing), closeGiveBackWindow)
	defer cancel()
	select {
	case <-h.names.Close():
	case <-ctx.Done():
	}
	for _, o := range h.names.Drain() {
		h.giveBackNow(ctx, o.Name, o.Offer)
	}
}

// closeGiveBackWindow bounds how long Close spends on offers left.
const closeGiveBackWindow = 2 * time.Second

// giveBack takes back, in the background, this client's offer o for lock
// name, which no waiter will take (see scripts.GiveBack).
func (h *handoffs) giveBack(name string, o waitstate.Offer) {
	if o.N == 0 {
		return
	}
	started := h.background(func() {
		ctx, cancel := cleanup(h.closing)
		defer cancel()
		h.giveBackNow(ctx, name, o)
	})
	if !started { // Close has begun: it gives back what the table holds
		h.names.KeepForClose(name, o)
	}
}

// takeBack gives back grant n of lock name that came to a wait that does
// not take it, unless a wait took it already.
func (h *handoffs) takeBack(name string, n int64) {
	if _, _, ok := h.names.Take(name, n); ok {
		h.giveBack(name, waitstate.Offer{N: n, Last: n})
	}
}

// giveBackNow runs scripts.GiveBack for offer o of lock name.
func (h *handoffs) giveBackNow(ctx context.Context, name string, o waitstate.Offer) {
	listens := h.listensFor(name)
	drop := !h.sub.HasWaiters(scripts.WakeChannel(name, h.id))
	if drop { // see handoffs.ownOffer
		defer h.drops.Sending()()
	}
	released, err := scripts.GiveBack(ctx, h.runner.conn(), name, h.id, o.N, o.Last, h.publish, listens, drop)
	h.log.Debug("relock: took back a handoff offer", "lock", name, "n", o.N, "last", o.Last, "released", released, "error", err)
}

// ownOffer is the offer a release of lock name by this client writes if it
// frees the lock: this client's, while it has waiters that take handoffs
// and no write of it ran (N is 0 otherwise: a release that gives one of
// its numbers moves it on, see waitstate.Table.Next); none when it does
// not listen on Redisson's channel (Listens). A client with no waiter on
// the lock's wake channel is dropped from the waiters' set by that
// release (Drop), where a handoff, or an attempt that left it, may have
// left it; the release is then counted as a drop (see waitstate.Drops): a
// waiter that registered the client and was not on the channel yet looks
// again. done, called with the release's answer, counts it.
func (h *handoffs) ownOffer(name string) (o scripts.Offer, done func()) {
	// A client that does not listen on Redisson's channel has not waited
	// on the lock lately: it has no offer, and is not registered (the
	// commonest release, uncontended, sends no more than its id).
	o.Client = h.id
	listens := h.listensFor(name)
	if listens == 0 {
		return o, func() {}
	}
	lease := h.lease
	offer, old := h.names.Next(name, lease, h.owners, false)
	h.giveBack(name, old)
	o = scripts.Offer{Client: h.id, N: offer.N, Last: offer.Last, Lease: lease, Keep: h.keep, Listens: listens}
	if o.Drop = !h.sub.HasWaiters(scripts.WakeChannel(name, h.id)); o.Drop {
		return o, h.drops.Sending()
	}
	return o, func() {}
}
