package reentrant

import (
	"context"

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

// giveBack takes back, in the background, this client's offer n for lock
// name, which no waiter will take (see scripts.GiveBack).
func (c *Client) giveBack(name string, n int64) {
	if n == 0 {
		return
	}
	started := c.background(func() {
		ctx, cancel := cleanup(c.closing)
		defer cancel()
		c.giveBackNow(ctx, name, n)
	})
	if !started { // Close has begun: it gives back what the table holds
		c.offers.KeepForClose(name, n)
	}
}

// takeBack gives back grant n of lock name that came to a wait that does
// not take it, unless a wait took it already.
func (c *Client) takeBack(name string, n int64) {
	if _, _, ok := c.offers.Take(name, n); ok {
		c.giveBack(name, n)
	}
}

// giveBackNow runs scripts.GiveBack for offer n of lock name.
func (c *Client) giveBackNow(ctx context.Context, name string, n int64) {
	listens := c.listensFor(name)
	drop := !c.sub.HasWaiters(scripts.WakeChannel(name, c.id))
	if drop { // see Client.ownOffer
		defer c.drops.Sending()()
	}
	released, err := scripts.GiveBack(ctx, c.runner.conn(), name, c.id, n, c.publish, listens, drop)
	c.opts.Logger.Debug("relock: took back a handoff offer", "lock", name, "n", n, "released", released, "error", err)
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
func (c *Client) ownOffer(name string) (o scripts.Offer, done func()) {
	// A client that does not listen on Redisson's channel has not waited
	// on the lock lately: it has no offer, and is not registered (the
	// commonest release, uncontended, sends no more than its id).
	o.Client = c.id
	listens := c.listensFor(name)
	if listens == 0 {
		return o, func() {}
	}
	lease := c.opts.WatchdogTimeout
	n, old := c.offers.Next(name, lease, &c.nextOwner)
	c.giveBack(name, old)
	o = scripts.Offer{Client: c.id, N: n, Lease: lease, Keep: c.opts.markTTL(), Listens: listens}
	if o.Drop = !c.sub.HasWaiters(scripts.WakeChannel(name, c.id)); o.Drop {
		return o, c.drops.Sending()
	}
	return o, func() {}
}
