package reentrant

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

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

// offerTable holds this client's offers, one per lock name with waiters
// that take handoffs.
type offerTable struct {
	mu sync.Mutex
	m  map[string]*offer
	// waits counts the waits joined and not left; once Close began
	// (closing is made), the last to leave closes closing, and offers are
	// left for Close to give back (see Client.giveBackAll).
	waits   int
	closing chan struct{}
	left    []givenBack // see keepForClose
}

// givenBack is an offer to give back: owner number n of lock name.
type givenBack struct {
	name string
	n    int64
}

// offer is this client's offer for one lock.
type offer struct {
	// n is the owner number offered, or about to be; 0: none. pending
	// counts writes of n sent and not answered; stored: one ran, or may
	// have. Either way n is given back, not dropped (see leave).
	n       int64
	pending int
	stored  bool
	// sent is when n was made, before any write of it was sent: a release
	// that gives n sets at least lease from then as the lock's TTL (a
	// later write only makes it longer), so the taker counts its hold
	// from sent.
	sent  time.Time
	lease time.Duration
	// waiters counts the waits of this lock that take handoffs.
	waiters int
}

// written reports whether Redis may hold an offer of o.n.
func (o *offer) written() bool { return o.n != 0 && (o.stored || o.pending > 0) }

// join counts a wait of name that takes handoffs.
func (t *offerTable) join(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*offer)
	}
	o := t.m[name]
	if o == nil {
		o = &offer{}
		t.m[name] = o
	}
	o.waiters++
	t.waits++
}

// leave ends a wait that join counted; ended counts it out. The last to
// leave drops the offer, and returns its owner number when it must be
// given back (see Client.giveBack), else 0.
func (t *offerTable) leave(name string) (giveBack int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.m[name]
	if o == nil {
		return 0
	}
	if o.waiters--; o.waiters > 0 {
		return 0
	}
	if !o.written() {
		delete(t.m, name)
		return 0
	}
	if t.closing != nil {
		return 0 // Close gives it back
	}
	delete(t.m, name)
	return o.n
}

// keepForClose keeps offer n of name for Close to give back.
func (t *offerTable) keepForClose(name string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.left = append(t.left, givenBack{name, n})
}

// ended counts out a wait that join counted, once what it had to give
// back is given back or kept for Close (see leave).
func (t *offerTable) ended() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waits--; t.closing != nil && t.waits == 0 {
		close(t.closing)
	}
}

// close marks the table closing, and returns a channel closed once every
// wait has left it.
func (t *offerTable) close() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closing == nil {
		t.closing = make(chan struct{})
		if t.waits == 0 {
			close(t.closing)
		}
	}
	return t.closing
}

// next returns the owner number to offer for name in a write about to be
// sent (see done), made now if there is none; 0 when no wait of name
// takes handoffs. An offer a third of its lease old is replaced by a new
// one, and the old one returned to be given back: a hold given from it
// would be believed for less than two thirds of its lease, and the
// watchdog renews every third. Owner numbers are drawn from owners.
func (t *offerTable) next(name string, lease time.Duration, owners *atomic.Int64) (n, old int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.m[name]
	if o == nil || o.waiters == 0 {
		return 0, 0
	}
	if o.n != 0 && time.Since(o.sent) > o.lease/3 {
		if o.written() {
			old = o.n
		}
		o.n = 0
	}
	if o.n == 0 {
		// Made before any write of n is sent: a TTL set from one of
		// them ends after now + lease.
		o.n, o.sent, o.lease, o.pending, o.stored = owners.Add(1), time.Now(), lease, 0, false
	}
	o.pending++
	return o.n, old
}

// done records the answer to a write of n that next returned: wrote, it
// may have stored the offer (it failed to take the lock, or its reply was
// lost). Nothing changes when n was taken meanwhile.
func (t *offerTable) done(name string, n int64, wrote bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o := t.m[name]; o != nil && o.n == n && n != 0 {
		o.pending--
		o.stored = o.stored || wrote
	}
}

// take takes owner number n of name's offer for the caller, once: it
// reports false when n is not the offer's (taken already, or stale). It
// returns when the hold's TTL is known to last from, and how long.
func (t *offerTable) take(name string, n int64) (sent time.Time, lease time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.m[name]
	if o == nil || n == 0 || o.n != n {
		return time.Time{}, 0, false
	}
	sent, lease = o.sent, o.lease
	o.n, o.pending, o.stored = 0, 0, false
	return sent, lease, true
}

// drain empties the table, and returns every offer that may have been
// written, to be given back.
func (t *offerTable) drain() []givenBack {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.left
	for name, o := range t.m {
		if o.written() {
			out = append(out, givenBack{name, o.n})
		}
	}
	t.m, t.left = nil, nil
	return out
}

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
		c.offers.keepForClose(name, n)
	}
}

// takeBack gives back grant n of lock name that came to a wait that does
// not take it, unless a wait took it already.
func (c *Client) takeBack(name string, n int64) {
	if _, _, ok := c.offers.take(name, n); ok {
		c.giveBack(name, n)
	}
}

// giveBackNow runs scripts.GiveBack for offer n of lock name.
func (c *Client) giveBackNow(ctx context.Context, name string, n int64) {
	listens := c.listensFor(name)
	drop := !c.sub.HasWaiters(scripts.WakeChannel(name, c.id))
	if drop { // see Client.ownOffer
		defer c.drops.sending()()
	}
	released, err := scripts.GiveBack(ctx, c.scriptConn(), name, c.id, n, c.publish, listens, drop)
	c.opts.Logger.Debug("relock: took back a handoff offer", "lock", name, "n", n, "released", released, "error", err)
}

// ownOffer is the offer a release of lock name by this client writes if it
// frees the lock: this client's, while it has waiters that take handoffs
// (N is 0 when it has none); none when it does not listen on Redisson's
// channel (Listens). A client with no waiter on the lock's wake
// channel is dropped from the waiters' set by that release (Drop), where
// a handoff, or an attempt that left it, may have left it; the release is
// then counted as a drop (see dropCount): a waiter that registered the
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
	n, old := c.offers.next(name, lease, &c.nextOwner)
	c.giveBack(name, old)
	o = scripts.Offer{Client: c.id, N: n, Lease: lease, Keep: c.registerTTL(), Listens: listens}
	if o.Drop = !c.sub.HasWaiters(scripts.WakeChannel(name, c.id)); o.Drop {
		return o, c.drops.sending()
	}
	return o, func() {}
}
