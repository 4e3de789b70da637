// Package waitstate is what one client keeps about its waits between
// calls: per lock name, the handoff offer its waiters take and whether its
// last wait queued (Table); for the whole client, the drops it has sent
// (Drops). It holds bookkeeping only: what is sent to Redis, and when, is
// decided by the reentrant package that calls it.
//
// Handoffs (docs/waiting.md): a plain lock's release gives the lock to the
// next relock client in the waiters' set, instead of telling it the lock is
// free. The client offers, for each lock its waiters wait on, owner
// numbers made for the purpose (an Offer); its waiters' failed attempts
// write the offer, a release gives the lock to its first number and moves
// it on to the next, and the waiter woken takes the number for its own.
// Each number is handed to one waiter at most (Take), and an offer that no
// waiter will take is returned to be given back.
package waitstate

import (
	"sync"
	"sync/atomic"
	"time"
)

// MaxQueued bounds the names a Table remembers as queued: past it, it
// forgets them all at once.
const MaxQueued = 1024

// Table holds a client's state per lock name. The zero Table is ready.
type Table struct {
	mu sync.Mutex
	m  map[string]*entry
	// queued counts the entries marked queued.
	queued int
	// waits counts the waits joined and not left; once Close began
	// (closing is made), the last to leave closes closing, and offers are
	// left for Close to give back (see Drain).
	waits   int
	closing chan struct{}
	left    []GivenBack // see KeepForClose
}

// Offer is a client's handoff offer for one lock: owner numbers N to Last,
// made together, which releases give one after another (see handOn in
// scripts/wakelib.lua). The zero Offer is none.
type Offer struct{ N, Last int64 }

// OfferSize is how many owner numbers an offer holds at most: one per wait
// that takes handoffs when it is made. A release that gives one moves the
// offer on to the next itself, so that a client with many waiters does not
// write a new offer in every release (three commands of each) but once its
// numbers run out, or it is a third of its lease old (see Next). No more
// numbers than waits: the last wait to leave gives back the numbers left,
// or a release would give one to a client with no wait to take it.
const OfferSize = 16

// GivenBack is an offer to give back: the owner numbers of lock Name's
// Offer that no waiter took.
type GivenBack struct {
	Name string
	Offer
}

// entry is the state of one lock name. It is dropped once it has no
// waiter, no offer that may be written, and no queued mark.
type entry struct {
	// n to last are the owner numbers offered, or about to be, that no
	// waiter took; n is 0 for none. pending counts writes of the offer
	// sent and not answered; stored: one ran, or may have. Either way the
	// offer is given back, not dropped (see Leave).
	n, last int64
	pending int
	stored  bool
	// sent is when the offer was made, before any write of it was sent: a
	// release that gives one of its numbers sets at least lease from then
	// as the lock's TTL (a later write only makes it longer), so the taker
	// counts its hold from sent.
	sent  time.Time
	lease time.Duration
	// waiters counts the waits of this lock that take handoffs.
	waiters int
	// queued: the last wait on this lock queued in Redis.
	queued bool
}

// written reports whether Redis may hold an offer of e.n.
func (e *entry) written() bool { return e.n != 0 && (e.stored || e.pending > 0) }

// clearOffer forgets e's offer.
func (e *entry) clearOffer() { e.n, e.last, e.pending, e.stored = 0, 0, 0, false }

// offer returns e's offer.
func (e *entry) offer() Offer {
	if e.n == 0 {
		return Offer{}
	}
	return Offer{e.n, e.last}
}

// tidy drops the entry of name when it holds nothing. Call with t.mu held.
func (t *Table) tidy(name string, e *entry) {
	if e.waiters == 0 && !e.written() && !e.queued {
		delete(t.m, name)
	}
}

// get returns the entry of name, made if make is set; nil when there is
// none. Call with t.mu held.
func (t *Table) get(name string, make bool) *entry {
	e := t.m[name]
	if e == nil && make {
		if t.m == nil {
			t.m = map[string]*entry{}
		}
		e = &entry{}
		t.m[name] = e
	}
	return e
}

// Join counts a wait of name that takes handoffs.
func (t *Table) Join(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(name, true).waiters++
	t.waits++
}

// Leave ends a wait that Join counted; Ended counts it out. The last to
// leave drops the offer, and returns it when it must be given back, else
// the zero Offer. Once Close began, an offer is kept for Drain.
func (t *Table) Leave(name string) (giveBack Offer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(name, false)
	if e == nil {
		return Offer{}
	}
	if e.waiters--; e.waiters > 0 {
		return Offer{}
	}
	if e.written() {
		if t.closing != nil {
			return Offer{} // Drain returns it
		}
		giveBack = e.offer()
	}
	e.clearOffer()
	t.tidy(name, e)
	return giveBack
}

// KeepForClose keeps offer o of name for Drain.
func (t *Table) KeepForClose(name string, o Offer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.left = append(t.left, GivenBack{name, o})
}

// Ended counts out a wait that Join counted, once what it had to give back
// is given back or kept for Close (see Leave).
func (t *Table) Ended() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waits--; t.closing != nil && t.waits == 0 {
		close(t.closing)
	}
}

// Close marks the table closing, and returns a channel closed once every
// wait has left it.
func (t *Table) Close() <-chan struct{} {
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

// Next returns the offer of name for a write about to be sent (see Done),
// made now if there is none; the zero Offer when no wait of name takes
// handoffs, or, unless rewrite, when a write of the offer ran already (a
// release need not write it again: the releases that give its numbers
// move it on). An offer a third of its lease old is replaced by a new
// one, and the old one returned to be given back: a hold given from it
// would be believed for less than two thirds of its lease, and the
// watchdog renews every third. Owner numbers are drawn from owners, one
// for each wait of name, OfferSize at most.
func (t *Table) Next(name string, lease time.Duration, owners *atomic.Int64, rewrite bool) (o, old Offer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(name, false)
	if e == nil || e.waiters == 0 {
		return Offer{}, Offer{}
	}
	if e.n != 0 && time.Since(e.sent) > e.lease/3 {
		if e.written() {
			old = e.offer()
		}
		e.clearOffer()
	}
	if e.n == 0 {
		// Made before any write of it is sent: a TTL set from one of
		// them ends after now + lease.
		size := int64(min(e.waiters, OfferSize))
		e.last = owners.Add(size)
		e.n, e.sent, e.lease, e.pending, e.stored = e.last-size+1, time.Now(), lease, 0, false
	} else if e.stored && !rewrite {
		return Offer{}, old
	}
	e.pending++
	return e.offer(), old
}

// Done records the answer to a write of o that Next returned: wrote, it
// may have stored the offer (it failed to take the lock, or its reply was
// lost). Nothing changes when the offer was replaced or used up meanwhile.
func (t *Table) Done(name string, o Offer, wrote bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.get(name, false); e != nil && e.last == o.Last && o.N != 0 {
		e.pending--
		e.stored = e.stored || wrote
	}
}

// Take takes owner number n of name's offer for the caller, once: it
// reports false when n is not one of the offer's numbers left (taken
// already, or stale). The numbers before n go with it: releases give them
// in turn, so one given before n that no waiter took has expired. It
// returns when the hold's TTL is known to last from, and how long.
func (t *Table) Take(name string, n int64) (sent time.Time, lease time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(name, false)
	if e == nil || n == 0 || n < e.n || n > e.last {
		return time.Time{}, 0, false
	}
	sent, lease = e.sent, e.lease
	if e.n = n + 1; e.n > e.last {
		e.clearOffer()
	}
	return sent, lease, true
}

// Withdrawn forgets offer o of name, which Redis no longer holds (a win
// took the client out of the waiters' set, with its offer).
func (t *Table) Withdrawn(name string, o Offer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.get(name, false); e != nil && e.last == o.Last && o.N != 0 {
		e.clearOffer()
	}
}

// Waiters returns the number of waits of name that Join counted and Leave
// did not.
func (t *Table) Waiters(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.get(name, false); e != nil {
		return e.waiters
	}
	return 0
}

// Drain empties the table, and returns every offer that may have been
// written, to be given back.
func (t *Table) Drain() []GivenBack {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.left
	for name, e := range t.m {
		if e.written() {
			out = append(out, GivenBack{name, e.offer()})
		}
	}
	t.m, t.left, t.queued = nil, nil, 0
	return out
}

// Queued reports whether the last wait on lock name queued in Redis. A
// wait on such a lock is likely to queue again, so it subscribes before its
// first attempt; a wait on any other lock pays for no subscription when
// the lock is free.
func (t *Table) Queued(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(name, false)
	return e != nil && e.queued
}

// Waited records whether a wait on lock name queued. Past MaxQueued names
// it forgets every other one, so a client that waits on many names keeps
// a bounded table.
func (t *Table) Waited(name string, queued bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(name, queued)
	if e == nil || e.queued == queued {
		return
	}
	if queued && t.queued >= MaxQueued {
		for other, o := range t.m {
			if o.queued {
				o.queued = false
				t.tidy(other, o)
			}
		}
		t.queued = 0
	}
	e.queued = queued
	if queued {
		t.queued++
	} else {
		t.queued--
	}
	t.tidy(name, e)
}

// Drops counts a client's attempts that take it out of a lock's waiters'
// set if they win (scripts.SettleDrop): sent, and sent but not yet
// answered. A winner drops the client when no other waiter of it is on the
// wake channel; another waiter may have failed, registering the client,
// and not be on the channel yet. If the drop ran after that registration,
// that waiter sleeps with the client out of the set, and no release tells
// it: so a waiter that subscribes after its failed attempt looks again at
// once when a drop may have run after that attempt. The zero Drops is
// ready.
type Drops struct{ sent, inFlight atomic.Int64 }

// DropMark is what a directed attempt read of its client's Drops as it
// was sent.
type DropMark struct {
	sent int64
	busy bool // a drop was in flight
}

// Mark reads d for an attempt about to be sent.
func (d *Drops) Mark() DropMark {
	return DropMark{sent: d.sent.Load(), busy: d.inFlight.Load() > 0}
}

// Since reports whether a drop may have run after an attempt sent at m
// ran: one was in flight then, or one was sent since. (A drop sent before
// m and answered by then ran before the attempt was sent.)
func (d *Drops) Since(m DropMark) bool { return m.busy || d.sent.Load() != m.sent }

// Sending counts a drop about to be sent; the returned func counts its
// answer, or its failure.
func (d *Drops) Sending() func() {
	d.sent.Add(1)
	d.inFlight.Add(1)
	return func() { d.inFlight.Add(-1) }
}

// Grants is a fair or priority lock's wait that takes the lock straight
// from a release: an attempt that queues asks, with its number, to be
// granted the lock, and a release that frees it grants it to the head of
// the queue, naming that number on the head's channel. The zero Grants
// takes none.
type Grants struct {
	On bool
	// queued: the last attempt was answered that the wait is queued, so a
	// grant that names it came after it ran; Waited: an attempt was.
	queued, Waited bool
}

// Answered records the reply to an attempt: queued, it found the lock
// taken and the wait in the queue.
func (g *Grants) Answered(queued bool) {
	g.queued = queued
	g.Waited = g.Waited || queued
}

// Granted reports whether grant n, the number a release named on the
// wait's channel (0: none), grants the lock to attempt number tries, the
// last one, which queued. A grant that names an earlier attempt is stale.
func (g *Grants) Granted(n int64, tries int) bool {
	return n == int64(tries) && g.queued
}
