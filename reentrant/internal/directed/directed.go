// Package directed is a client's side of directed wakes and handoffs,
// relock's addition to Redisson's protocol for plain and fenced locks
// (docs/waiting.md): what the client sends to keep its offers right
// (Handoffs) and one wait's part in them (Wait). The protocol itself, and
// when the cycle calls each of these, is in reentrant/directed.go.
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
// table hands it to one waiter at most (Wait.Take). An offer that no waiter will take is taken back
// (Handoffs.GiveBack), which releases the lock if it was given meanwhile; a message
// lost with a connection is made up by the next attempt, which finds the
// lock held by the offer's owner (scripts.Acquired.Handed).

package directed

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// Handoffs is a client's side of directed wakes and handoffs: the drops
// it sent, and what it sends to keep its offers right (give-backs,
// pass-ons, the offer a release writes). The offers themselves are in the
// client's per-name table. The client makes it in New, once its channels
// and rights are known.
type Handoffs struct {
	Names   *waitstate.Table
	Drops   waitstate.Drops
	ID      string // the client's
	Sub     *pubsub.Subscriber
	Publish scripts.Publish
	Conn    func() scripts.Conn // runs the scripts
	Owners  *atomic.Int64       // owner numbers, shared with Client.NewOwner
	// Lease is an offer's (the watchdog's timeout); Keep, how long a
	// release keeps the waiters' set alive (Options.markTTL).
	Lease, Keep time.Duration
	Log         *slog.Logger
	// Background and Closing are the client's (Client.background);
	// Window bounds a give-back or pass-on (the release window).
	Background func(func()) bool
	Closing    context.Context
	Window     time.Duration
}

// cleanup is the context of a give-back or pass-on: ctx's values, bounded
// by the window.
func (h *Handoffs) cleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), h.Window)
}

// nothing is the no-op after a release that sends no drop.
func nothing() {}

// PassOn returns what hands on a directed wake for lock name that found no waiter of c
// to take it (see scripts.PassOn), which takes c out of the lock's waiters'
// set. A waiter of c that joined the wake channel meanwhile may have made
// its attempt, which left c registered, before the pass-on ran (the two go
// out on different connections): it would sleep unregistered. So, once the
// pass-on has run, a waiter of c's is nudged to try again, which registers
// c anew. It does not block.
func (h *Handoffs) PassOn(name string) func() {
	return func() {
		h.Background(func() {
			ctx, cancel := h.cleanup(h.Closing)
			defer cancel()
			// A drop, as a win's SettleDrop (see waitstate.Drops).
			defer h.Drops.Sending()()
			if err := scripts.PassOn(ctx, h.Conn(), name, h.ID, h.Publish, h.ListensFor(name)); err != nil {
				h.Log.Debug("relock: passing on a wake", "lock", name, "error", err)
			}
			h.Sub.Nudge(scripts.WakeChannel(name, h.ID))
		})
	}
}

// ListensFor is how long at least c will still listen on lock name's
// Redisson channel, counted from now (see scripts.Offer.Listens): 0 when
// it does not, and never less than a millisecond when it does, a
// subscription being unsubscribed included (a release may count it yet).
// A client that stops waiting stays in the lock's waiters' set for that
// long, as a mark, so that a release counts it among the listeners that
// are not Java waiters.
func (h *Handoffs) ListensFor(name string) time.Duration {
	if h.Sub.Idle() { // the uncontended path: no channel name built
		return 0
	}
	d, subscribed := h.Sub.ListensFor(scripts.LockChannel(name))
	if !subscribed {
		return 0
	}
	return max(d, time.Millisecond)
}

// GiveBackAll takes back, as Close does, every handoff offer left: a
// release may have given the lock to one whose waiters ended (Close ends
// them). It waits for the waits that take handoffs to end first, then
// sends the give-backs; all within closeGiveBackWindow. A give-back that
// is not sent leaves a lock given meanwhile to its TTL.
func (h *Handoffs) GiveBackAll() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.Closing), closeGiveBackWindow)
	defer cancel()
	select {
	case <-h.Names.Close():
	case <-ctx.Done():
	}
	for _, o := range h.Names.Drain() {
		h.giveBackNow(ctx, o.Name, o.Offer)
	}
}

// closeGiveBackWindow bounds how long Close spends on offers left.
const closeGiveBackWindow = 2 * time.Second

// GiveBack takes back, in the background, this client's offer o for lock
// name, which no waiter will take (see scripts.GiveBack).
func (h *Handoffs) GiveBack(name string, o waitstate.Offer) {
	if o.N == 0 {
		return
	}
	started := h.Background(func() {
		ctx, cancel := h.cleanup(h.Closing)
		defer cancel()
		h.giveBackNow(ctx, name, o)
	})
	if !started { // Close has begun: it gives back what the table holds
		h.Names.KeepForClose(name, o)
	}
}

// TakeBack gives back grant n of lock name that came to a wait that does
// not take it, unless a wait took it already.
func (h *Handoffs) TakeBack(name string, n int64) {
	if _, _, ok := h.Names.Take(name, n); ok {
		h.GiveBack(name, waitstate.Offer{N: n, Last: n})
	}
}

// giveBackNow runs scripts.GiveBack for offer o of lock name.
func (h *Handoffs) giveBackNow(ctx context.Context, name string, o waitstate.Offer) {
	listens := h.ListensFor(name)
	drop := !h.Sub.HasWaiters(scripts.WakeChannel(name, h.ID))
	if drop { // see OwnOffer
		defer h.Drops.Sending()()
	}
	released, err := scripts.GiveBack(ctx, h.Conn(), name, h.ID, o.N, o.Last, h.Publish, listens, drop)
	h.Log.Debug("relock: took back a handoff offer", "lock", name, "n", o.N, "last", o.Last, "released", released, "error", err)
}

// OwnOffer is the offer a release of lock name by this client writes if it
// frees the lock: this client's, while it has waiters that take handoffs
// and no write of it ran (N is 0 otherwise: a release that gives one of
// its numbers moves it on, see waitstate.Table.Next); none when it does
// not listen on Redisson's channel (Listens). A client with no waiter on
// the lock's wake channel is dropped from the waiters' set by that
// release (Drop), where a handoff, or an attempt that left it, may have
// left it (see Released).
func (h *Handoffs) OwnOffer(name string) scripts.Offer {
	// A client that does not listen on Redisson's channel has not waited
	// on the lock lately: it has no offer, and is not registered (the
	// commonest release, uncontended, sends no more than its id).
	o := scripts.Offer{Client: h.ID}
	listens := h.ListensFor(name)
	if listens == 0 {
		return o
	}
	lease := h.Lease
	offer, old := h.Names.Next(name, lease, h.Owners, false)
	h.GiveBack(name, old)
	o = scripts.Offer{Client: h.ID, N: offer.N, Last: offer.Last, Lease: lease, Keep: h.Keep, Listens: listens}
	o.Drop = !h.Sub.HasWaiters(scripts.WakeChannel(name, h.ID))
	return o
}

// Released is called as a release of lock name that writes offer o goes
// out, and returns what follows its answer. A release that drops the
// client is counted as a drop (see waitstate.Drops): a waiter that
// registered the client and was not on the channel yet looks again.
func (h *Handoffs) Released(name string, o scripts.Offer) func() {
	done := nothing
	if o.Drop {
		done = h.Drops.Sending()
	}
	return func() {
		h.Names.Done(name, waitstate.Offer{N: o.N, Last: o.Last}, true)
		done()
	}
}

// Wait is one wait's part in directed wakes, and, for a wait that takes
// handoffs, in its client's offer. The cycle calls it at fixed points: for
// a hold a release handed over (Take), with each attempt's arguments
// (Args), after an attempt that failed (Failed) or found the lock held
// (FoundHolder), after a win (Nudge), and at the end (End).
type Wait struct {
	H    *Handoffs
	name string
	// waits: the call waits, so a failed attempt registers the client;
	// offers: the kind's releases hand the lock on.
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

// NewWait is the part of a wait for lock name in h's directed wakes:
// waits, the call waits; offers, the lock's releases hand it on; handoff,
// the wait takes a hold a release hands its client.
func NewWait(h *Handoffs, name string, waits, offers, handoff bool) Wait {
	return Wait{H: h, name: name, waits: waits, offers: offers, handoff: handoff}
}

// Handed is the owner number the attempt in flight offered; 0 for none.
func (d *Wait) Handed() int64 { return d.handed }

// Take takes the hold a release gave the client's offer n, if n is the
// offer's and the wait takes handoffs; one it does not take goes back
// (Handoffs.TakeBack). It returns when the hold's TTL is known to last
// from, and how long.
func (d *Wait) Take(n int64) (sent time.Time, lease time.Duration, ok bool) {
	if !d.handoff {
		d.H.TakeBack(d.name, n)
		return time.Time{}, 0, false
	}
	sent, lease, ok = d.H.Names.Take(d.name, n)
	if ok {
		d.dropping = false
	}
	return sent, lease, ok
}

// Args returns the directed-wake part of attempt number tries, which asks
// for a hold of ttl; sub is the wait's channel, if it has joined one.
func (d *Wait) Args(sub *pubsub.Waiter, tries int, ttl time.Duration) scripts.Wake {
	w := scripts.Wake{Client: d.H.ID, Settle: scripts.SettleKeep, Offers: d.offers}
	if d.waits {
		w.Register = d.H.Keep
	}
	if d.registered {
		w.Settle = scripts.SettleDrop
		if sub != nil && !sub.Alone() {
			w.Settle = scripts.SettleRequeue
		} else if w.Offers {
			w.Listens = d.H.ListensFor(d.name)
		}
	}
	d.dropping = w.Settle == scripts.SettleDrop
	if d.handoff && (tries > 1 || sub != nil) {
		// Not with a first attempt that found no channel live: it most
		// likely takes a free lock, and one that fails is followed at
		// once by one after subscribing.
		d.join()
		o, old := d.H.Names.Next(d.name, ttl, d.H.Owners, true)
		w.OfferFirst, w.OfferLast = o.N, o.Last
		d.H.GiveBack(d.name, old)
	}
	d.handed = w.OfferFirst
	return w
}

// join counts the wait among its client's offer's waits, once.
func (d *Wait) join() {
	if !d.joined {
		d.H.Names.Join(d.name)
		d.joined = true
	}
}

// Failed follows an attempt that did not take the lock: the pause after
// it may leave this wait to its client's wake, with no attempt of its own
// to come (see reentrant's waiting.recheck), so it is counted now among the offer's
// waits, which keeps its client's releases offering for it.
func (d *Wait) Failed() {
	if d.handoff {
		d.join()
	}
}

// FoundHolder notes that an attempt found the lock held: the client is
// registered if the call waits.
func (d *Wait) FoundHolder() {
	d.registered = d.registered || d.waits
}

// Nudge follows a win whose attempt took the client out of the lock's
// waiters' set (SettleDrop: its waiter was alone on the wake channel when
// the attempt was made). A waiter of this client that joined the channel
// after that, and made its own attempt before the win ran, registered
// nothing (the client was still in the set), so it sleeps unregistered: no
// release tells it, and it waits out its timer, the holder's TTL or the
// re-poll interval. A wake passed to it makes it try again, which registers
// the client anew. A waiter that joins after this check needs none: its
// attempt after joining runs after the win.
func (d *Wait) Nudge(sub *pubsub.Waiter) {
	if d.dropping && sub != nil && !sub.Alone() {
		sub.PassOn()
	}
}

// End follows the wait's end. A handoff that came to sub after the wait
// left is given back, and the wait leaves its client's offer, the last to
// leave giving the offer back.
func (d *Wait) End(sub *pubsub.Waiter) {
	if sub != nil {
		if n := sub.TakeGiven(); n != 0 {
			d.H.TakeBack(d.name, n)
		}
	}
	if d.joined {
		d.H.GiveBack(d.name, d.H.Names.Leave(d.name))
		d.H.Names.Ended()
	}
}
