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

// Handoffs: a plain lock's release gives the lock to the next relock
// client in the waiters' set, instead of telling it the lock is free, so
// that the client's waiter holds it when the message comes, a round trip
// sooner, and the lock is never free between them (docs/waiting.md).
//
// The client offers, for each lock its waiters wait on, an owner made for
// the purpose ("<client-id>:<n>"): its waiters' failed attempts write the
// offer with their lease (scripts.Wake.Grant), and so does the release of
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
		h.giveBackNow(ctx, o.Name, o.N)
	}
}

// closeGiveBackWindow bounds how long Close spends on offers left.
const closeGiveBackWindow = 2 * time.Second

// giveBack takes back, in the background, this client's offer n for lock
// name, which no waiter will take (see scripts.GiveBack).
func (h *handoffs) giveBack(name string, n int64) {
	if n == 0 {
		return
	}
	started := h.background(func() {
		ctx, cancel := cleanup(h.closing)
		defer cancel()
		h.giveBackNow(ctx, name, n)
	})
	if !started { // Close has begun: it gives back what the table holds
		h.names.KeepForClose(name, n)
	}
}

// takeBack gives back grant n of lock name that came to a wait that does
// not take it, unless a wait took it already.
func (h *handoffs) takeBack(name string, n int64) {
	if _, _, ok := h.names.Take(name, n); ok {
		h.giveBack(name, n)
	}
}

// giveBackNow runs scripts.GiveBack for offer n of lock name.
func (h *handoffs) giveBackNow(ctx context.Context, name string, n int64) {
	listens := h.listensFor(name)
	drop := !h.sub.HasWaiters(scripts.WakeChannel(name, h.id))
	if drop { // see handoffs.ownOffer
		defer h.drops.Sending()()
	}
	released, err := scripts.GiveBack(ctx, h.runner.conn(), name, h.id, n, h.publish, listens, drop)
	h.log.Debug("relock: took back a handoff offer", "lock", name, "n", n, "released", released, "error", err)
}

// ownOffer is the offer a release of lock name by this client writes if it
// frees the lock: this client's, while it has waiters that take handoffs
// (N is 0 when it has none); none when it does not listen on Redisson's
// channel (Listens). A client with no waiter on the lock's wake
// channel is dropped from the waiters' set by that release (Drop), where
// a handoff, or an attempt that left it, may have left it; the release is
// then counted as a drop (see waitstate.Drops): a waiter that registered the
// client and was not on the channel yet looks again. done, called with
// the release's answer, counts it.
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
	n, old := h.names.Next(name, lease, h.owners)
	h.giveBack(name, old)
	o = scripts.Offer{Client: h.id, N: n, Lease: lease, Keep: h.keep, Listens: listens}
	if o.Drop = !h.sub.HasWaiters(scripts.WakeChannel(name, h.id)); o.Drop {
		return o, h.drops.Sending()
	}
	return o, func() {}
}
