package pubsub

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Mode says which kind of pub/sub the channels use. Publishers and
// subscribers must agree: a sharded subscriber never hears a classic
// message, nor the reverse.
type Mode int

// The modes.
const (
	// Classic is SUBSCRIBE/PUBLISH, served by any node.
	Classic Mode = iota + 1
	// Sharded is SSUBSCRIBE/SPUBLISH (Redis 7+), served by the node that
	// owns the channel's slot.
	Sharded
)

func (m Mode) String() string {
	switch m {
	case Classic:
		return "classic"
	case Sharded:
		return "sharded"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("pubsub: subscriber closed")

// ErrUnconfirmed is returned by Subscribe, with a waiter, when its ctx ended
// before the server confirmed the subscription (a slow or dark link, a
// server paused). The waiter stays queued and is woken once the
// subscription is confirmed: a message published before that went unheard.
var ErrUnconfirmed = errors.New("pubsub: subscription not confirmed yet")

// The messages on a lock's channel, Redisson's payloads: decimal integers,
// since Java Redisson parses them as numbers (and ignores any but these
// two). Lock releases publish them; [LockWakes] reads them.
const (
	// WakeOne: the lock is free; one waiter of each client tries.
	WakeOne = "0"
	// WakeAll: a writer left a read-write lock; every waiter tries.
	WakeAll = "1"
	// WakeTold: relock's own, on a lock's channel: the lock is free, and
	// the release told the next relock client directly (directed wakes),
	// so relock waiters listening there let it pass. Java Redisson parses
	// it as the number 0 (Long.valueOf, LockPubSub), so its waiters wake
	// as for [WakeOne].
	WakeTold = "00"
	// Granted: relock's own, on a fair lock waiter's channel, which only
	// that waiter hears: Granted + ":" + n says a release gave it the lock
	// in answer to its attempt number n (see [Waiter.TakeGiven]).
	// Redisson never publishes it, and its waiters would ignore it.
	Granted = "2"
)

// Wakes reads a message on a channel and says how many of the channel's
// local waiters it wakes: n > 0 that many (at most all), [All] every one, 0
// none. Each kind of channel has its own: Redisson's payloads mean
// different things on a lock's channel, a semaphore's and a latch's.
type Wakes func(message string) int

// The Wakes results that are not counts.
const (
	// All wakes every waiter.
	All = -1
	// Grant wakes the longest-waiting waiter with a grant (see
	// [Waiter.TakeGiven]).
	Grant = -2
)

// LockWakes reads a lock's channel: [WakeOne] wakes one waiter, [WakeAll]
// all, a [Granted] message the first with a grant; anything else, [WakeTold]
// included, none.
func LockWakes(message string) int {
	switch {
	case message == WakeOne:
		return 1
	case message == WakeAll:
		return All
	case grantTry(message) > 0:
		return Grant
	}
	return 0
}

// grantTry returns the attempt number a [Granted] message names, or 0.
func grantTry(message string) int64 {
	n, ok := strings.CutPrefix(message, Granted+":")
	if !ok {
		return 0
	}
	try, err := strconv.ParseInt(n, 10, 64)
	if err != nil || try < 0 {
		return 0
	}
	return try
}

// Subscriber shares subscriptions among local waiters. Its methods are safe
// for concurrent use.
type Subscriber struct {
	rdb    rueidis.Client
	mode   Mode
	slot   func(channel string) uint16
	log    *slog.Logger
	health Health
	linger time.Duration

	// channels counts the channels of every conn, so that Join can say
	// "none" without the lock when nothing is subscribed.
	channels atomic.Int32

	mu     sync.Mutex
	conns  map[uint16]*conn
	closed bool
	wg     sync.WaitGroup
}

// Health is told when a subscription connection cannot reach Redis (Down,
// at the loss of a working one and at each dial after that fails) and
// when one works again (Up), each with the connection's key. Its methods
// are called on the connection's goroutine and must not block. A client
// that reports outages of its own folds these into its report.
type Health interface {
	Down(conn uint16, err error)
	Up(conn uint16)
}

// New returns a Subscriber for rdb in the given mode. In sharded mode, slot
// maps a channel to its cluster slot; in classic mode it is not used. A
// channel that has an unclaimed handler (see Subscribe) stays subscribed for
// linger after its last waiter leaves, so that a waiter that comes back
// soon finds it live (see Join). A connection lost and back is told to
// health, or without one logged (a warning, then a note).
func New(rdb rueidis.Client, mode Mode, slot func(channel string) uint16, log *slog.Logger, linger time.Duration, health Health) *Subscriber {
	if log == nil {
		log = slog.Default()
	}
	if health == nil {
		health = logHealth{log}
	}
	return &Subscriber{rdb: rdb, mode: mode, slot: slot, log: log, health: health, linger: linger, conns: make(map[uint16]*conn)}
}

// logHealth logs a connection's outage: a warning when it is lost, a
// note when it is back.
type logHealth struct{ log *slog.Logger }

func (h logHealth) Down(_ uint16, err error) {
	h.log.Warn("relock: pub/sub connection lost; dialling again, and waiters poll meanwhile", "error", err)
}

func (h logHealth) Up(uint16) {
	h.log.Info("relock: pub/sub connection is back; resubscribed")
}

// Mode returns the subscriber's mode.
func (s *Subscriber) Mode() Mode { return s.mode }

// channel states
const (
	subscribing   = iota // SUBSCRIBE queued or sent, not yet confirmed
	live                 // confirmed
	unsubscribing        // UNSUBSCRIBE queued or sent, not yet confirmed
)

type channel struct {
	name   string
	state  int
	ready  chan struct{} // closed when a subscription is confirmed or fails
	err    error         // why it failed
	rewake bool          // wake every waiter when confirmed (after a reconnect)
	wakes  Wakes         // reads the channel's messages
	// unclaimed, if set, is called (without s.mu) when a wake finds no
	// waiter to take it.
	unclaimed func()
	// idle, while the channel lingers with no waiter, unsubscribes it at
	// idleAt.
	idle    *time.Timer
	idleAt  time.Time
	waiters list.List // of *Waiter, in arrival order
	// gap: the subscription was confirmed, or a message came while no
	// waiter was queued, and no waiter has yet been told to look again
	// for it (see Recheck).
	gap bool
}

// Waiter is one goroutine's place in a channel's queue.
type Waiter struct {
	// C receives a value when the waiter is woken.
	C    <-chan struct{}
	wake chan struct{}
	s    *Subscriber
	cn   *conn
	ch   *channel
	elem *list.Element
	// unconfirmed: Subscribe gave up waiting for the confirmation, which
	// is to wake the waiter (see ErrUnconfirmed). Guarded by s.mu.
	unconfirmed bool
	// failed: the subscription failed after the waiter joined (see
	// Failed).
	failed atomic.Bool
	// recheck: see Recheck.
	recheck bool
	// granted: see TakeGiven.
	granted atomic.Int64
}

// Subscribe joins the queue of channel name, subscribing it if this is its
// first waiter, and returns once the server has confirmed the subscription.
// wakes reads the channel's messages; unclaimed, if not nil, is called when
// a wake finds no waiter to take it (a message with every waiter gone or
// already woken, a wake left or passed on with no other waiter): it must
// not block. Every waiter of one channel must pass the same. The waiter
// must Leave. If the subscription cannot be made, Subscribe returns an
// error and no waiter. If ctx ends before the server has answered, it
// returns the waiter with [ErrUnconfirmed] (wrapping ctx's error): the
// waiter must still Leave.
func (s *Subscriber) Subscribe(ctx context.Context, name string, wakes Wakes, unclaimed func()) (*Waiter, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // not a coin toss against a quick confirmation
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	key := uint16(0)
	if s.mode == Sharded {
		key = s.slot(name)
	}
	cn := s.conns[key]
	if cn == nil {
		cn = s.newConn(key)
		s.conns[key] = cn
	}
	ch := cn.channels[name]
	if ch == nil {
		ch = &channel{name: name, state: subscribing, ready: make(chan struct{}), wakes: wakes, unclaimed: unclaimed, gap: true}
		cn.channels[name] = ch
		s.channels.Add(1)
		cn.queue(op{subscribe: true, name: name})
	}
	w := ch.join(s, cn)
	ready := ch.ready
	s.mu.Unlock()

	select {
	case <-ready:
	case <-ctx.Done():
	}
	s.mu.Lock()
	select {
	case <-ready: // settled, even if ctx ended too
	default:
		w.unconfirmed = true
		s.mu.Unlock()
		return w, fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err())
	}
	err := ch.err
	if err == nil && ch.gap {
		ch.gap, w.recheck = false, true
	}
	s.mu.Unlock()
	if err != nil {
		w.Leave()
		return nil, err
	}
	return w, nil
}

// Recheck reports whether Subscribe picked this waiter to look again at
// once at what it waits for: the first to return once the subscription it
// made or found pending was confirmed, or the first after a message that
// came while the channel had no waiter (it lingered). Such a message
// reached none of the channel's waiters. Where one look serves them all
// (a lock's wake told to the client, not to one waiter), only this waiter
// need take it; a waiter that found the channel live was not behind that
// gap.
func (w *Waiter) Recheck() bool { return w.recheck }

// TakeGiven returns the number named by the last [Granted] message that
// came for the waiter since the last call, or 0, and forgets it: a queued
// lock's grant (the attempt number it answers) or a plain lock's offer
// (the owner number the release gave the lock to). The message is named
// on the wire; the two mechanisms are grants and offers.
func (w *Waiter) TakeGiven() int64 { return w.granted.Swap(0) }

// Idle reports whether no channel is subscribed or being subscribed: Join
// would return nil for any name. It takes no lock.
func (s *Subscriber) Idle() bool { return s.channels.Load() == 0 }

// Subscribed reports whether channel name is subscribed or being
// subscribed: a message published on it may be counted as heard by this
// subscriber. It takes no lock when nothing is subscribed.
func (s *Subscriber) Subscribed(name string) bool {
	if s.Idle() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ch := s.lookup(name)
	return ch != nil
}

// HasWaiters reports whether channel name has waiters queued. It takes no
// lock when nothing is subscribed.
func (s *Subscriber) HasWaiters(name string) bool {
	if s.Idle() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ch := s.lookup(name)
	return ch != nil && ch.waiters.Len() > 0
}

// ListensFor reports whether channel name is subscribed or being
// subscribed or unsubscribed (as Subscribed: a message published on it may
// be counted as heard by this subscriber), and how long at least it will
// stay subscribed: the linger while it has waiters (they leave no sooner
// than now, and it lingers after the last), what is left of its linger
// while it lingers, and 0 when it is being unsubscribed or failed. It
// takes no lock when nothing is subscribed.
func (s *Subscriber) ListensFor(name string) (d time.Duration, subscribed bool) {
	if s.Idle() {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ch := s.lookup(name)
	switch {
	case ch == nil:
		return 0, false
	case ch.state == unsubscribing || ch.err != nil || s.closed:
		return 0, true
	case ch.idle != nil:
		return max(time.Until(ch.idleAt), 0), true
	case ch.waiters.Len() > 0:
		return s.linger, true
	}
	return 0, true
}

// Join joins the queue of channel name if the channel is live: subscribed,
// confirmed, and not being unsubscribed. Then a message published from now
// on reaches the waiter's queue, and Join returns the waiter, which must
// Leave; otherwise it returns nil, and Subscribe is the way in. It never
// waits for the server.
func (s *Subscriber) Join(name string) *Waiter {
	if s.Idle() { // the uncontended path: no lock taken
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cn, ch := s.lookup(name)
	if s.closed || ch == nil || ch.state != live || ch.err != nil {
		return nil
	}
	return ch.join(s, cn)
}

// lookup returns channel name and its connection, if subscribed or being
// subscribed. Called with s.mu held.
func (s *Subscriber) lookup(name string) (*conn, *channel) {
	key := uint16(0)
	if s.mode == Sharded {
		key = s.slot(name)
	}
	cn := s.conns[key]
	if cn == nil {
		return nil, nil
	}
	return cn, cn.channels[name]
}

// Nudge wakes the longest-waiting waiter of channel name not already
// woken, if the channel has one: for a caller that learns, other than by a
// message, that its waiters should try again.
func (s *Subscriber) Nudge(name string) {
	if s.channels.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ch := s.lookup(name); ch != nil && ch.waiters.Len() > 0 {
		ch.wake(1)
	}
}

// join adds a waiter to the channel's queue. Called with s.mu held.
func (ch *channel) join(s *Subscriber, cn *conn) *Waiter {
	if ch.idle != nil {
		ch.idle.Stop()
		ch.idle = nil
	}
	wake := make(chan struct{}, 1)
	w := &Waiter{C: wake, wake: wake, s: s, cn: cn, ch: ch}
	w.elem = ch.waiters.PushBack(w)
	return w
}

// Leave takes the waiter out of its queue. A wake it received and did not act
// on (still in C) passes to the next waiter. The last waiter to leave
// unsubscribes the channel. Leave is idempotent.
func (w *Waiter) Leave() {
	w.s.mu.Lock()
	if w.elem == nil {
		w.s.mu.Unlock()
		return
	}
	w.ch.waiters.Remove(w.elem)
	w.elem = nil
	var unclaimed func()
	select {
	case <-w.wake:
		if w.ch.err == nil { // not the wake of a failed subscription
			unclaimed = w.ch.wakeOne()
		}
	default:
	}
	if w.ch.waiters.Len() == 0 && w.ch.state != unsubscribing && w.ch.err == nil {
		if w.ch.unclaimed != nil && w.s.linger > 0 && w.ch.state == live {
			w.ch.linger(w.s, w.cn)
		} else {
			w.ch.unsubscribe(w.cn)
		}
	}
	w.s.mu.Unlock()
	if unclaimed != nil {
		unclaimed()
	}
}

// unsubscribe drops the channel, which has no waiter. Called with s.mu held.
func (ch *channel) unsubscribe(cn *conn) {
	ch.state = unsubscribing
	ch.ready = make(chan struct{})
	cn.queue(op{subscribe: false, name: ch.name})
}

// linger unsubscribes the channel after s.linger, unless a waiter joins it
// first. Called with s.mu held.
func (ch *channel) linger(s *Subscriber, cn *conn) {
	at := time.Now().Add(s.linger) // no later than t fires (see ListensFor)
	var t *time.Timer
	t = time.AfterFunc(s.linger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if ch.idle != t {
			return // a waiter joined, or the subscriber closed
		}
		ch.idle = nil
		switch {
		case ch.waiters.Len() > 0 || ch.err != nil || s.closed:
		case ch.state == live:
			ch.unsubscribe(cn)
		case ch.state == subscribing: // resubscribing after a reconnect
			ch.linger(s, cn)
		}
	})
	ch.idle, ch.idleAt = t, at
}

// PassOn hands a wake the waiter took from C, but will not act on, to the
// next waiter.
func (w *Waiter) PassOn() {
	w.s.mu.Lock()
	var unclaimed func()
	if w.elem != nil && w.ch.err == nil {
		unclaimed = w.ch.wakeOne()
	}
	w.s.mu.Unlock()
	if unclaimed != nil {
		unclaimed()
	}
}

// Failed reports whether the waiter's subscription failed after it joined
// (the server refused to subscribe it again after a reconnect). The waiter
// was woken then, and hears nothing more: it should Leave and subscribe
// anew.
func (w *Waiter) Failed() bool { return w.failed.Load() }

// Alone reports whether the waiter is its channel's only one.
func (w *Waiter) Alone() bool {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.ch.waiters.Len() <= 1
}

// wakeOne wakes the longest-waiting waiter not already woken, and returns
// the channel's unclaimed callback when there was none. Called with s.mu
// held.
func (ch *channel) wakeOne() func() { return ch.wake(1) }

// wake wakes the n longest-waiting waiters not already woken, or as many as
// there are, and returns the channel's unclaimed callback (nil if it has
// none) when the channel has no waiter at all. A wake that finds every
// waiter woken already is theirs: each will try, and one that gives up
// without trying passes its wake on when it leaves. Handed on instead, it
// would take the client out of a directed lock's waiters' set, and the
// script doing so may run after the attempt of a waiter woken before, which
// found the lock held and left the client registered: that waiter would
// sleep unregistered, told by no release. Called with s.mu held.
func (ch *channel) wake(n int) (unclaimed func()) {
	if ch.waiters.Len() == 0 {
		// Heard by no waiter: one that attempted before it and joins
		// after must look again (see Recheck).
		ch.gap = true
		return ch.unclaimed
	}
	for e := ch.waiters.Front(); e != nil && n > 0; e = e.Next() {
		if e.Value.(*Waiter).poke() { // else already woken; try the next
			n--
		}
	}
	return nil
}

// poke wakes the waiter, and reports false if it was woken already (a wake
// not yet taken from C).
func (w *Waiter) poke() bool {
	select {
	case w.wake <- struct{}{}:
		return true
	default:
		return false
	}
}

// wakeConfirmed wakes, once its subscription is confirmed, the waiters that
// may have missed a message: every one after a reconnect (rewake), else
// those that stopped waiting for the confirmation (see ErrUnconfirmed).
// Called with s.mu held.
func (ch *channel) wakeConfirmed() {
	for e := ch.waiters.Front(); e != nil; e = e.Next() {
		w := e.Value.(*Waiter)
		if ch.rewake || w.unconfirmed {
			w.unconfirmed = false
			w.poke()
		}
	}
	ch.rewake = false
}

// grant gives the grant a [Granted] message tells to the longest-waiting
// waiter, and wakes it if it is not awake already. Called with s.mu held.
func (ch *channel) grant(message string) {
	e := ch.waiters.Front()
	if e == nil {
		// Heard by no waiter: one that tried before it and joins after
		// looks again (see Recheck), and its attempt finds what the
		// grant gave.
		ch.gap = true
		return
	}
	w := e.Value.(*Waiter)
	w.granted.Store(grantTry(message))
	w.poke()
}

// wakeAll wakes every waiter. Called with s.mu held.
func (ch *channel) wakeAll() {
	for e := ch.waiters.Front(); e != nil; e = e.Next() {
		e.Value.(*Waiter).poke()
	}
}

// Channels returns how many channels are subscribed or being subscribed.
func (s *Subscriber) Channels() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, cn := range s.conns {
		n += len(cn.channels)
	}
	return n
}

// Close drops every subscription and connection and waits for the
// Subscriber's goroutines to end. Waiters still queued are not woken.
func (s *Subscriber) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	for _, cn := range s.conns {
		close(cn.stop)
		for _, ch := range cn.channels {
			if ch.idle != nil {
				ch.idle.Stop()
				ch.idle = nil
			}
			if ch.state != live {
				ch.fail(ErrClosed)
			}
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// fail ends a subscription attempt with err. Called with s.mu held.
func (ch *channel) fail(err error) {
	ch.err = err
	ch.settle()
}

// settle releases whoever waits for the channel's confirmation; it may run
// more than once. Called with s.mu held.
func (ch *channel) settle() {
	select {
	case <-ch.ready:
	default:
		close(ch.ready)
	}
}

// retryDelay is the pause before a lost connection is dialled again; it
// doubles after each dial that does not come up, to maxRetryDelay.
const (
	retryDelay    = 100 * time.Millisecond
	maxRetryDelay = time.Second
)
