package reentrant

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// outages tells the log of waits that go on while Redis cannot be reached
// (or cannot run scripts): one warning per client per outage, however many
// waits it holds up, naming how many and a few of them, and one line when
// Redis answers again. 500 parked goroutines in an outage are one line,
// not 500. The pub/sub connections report here too (pubsub.Health): a
// lost one is one more thing held up, not lines of its own.
//
// An outage begins with the first attempt that fails for want of Redis
// while no wait is failing so; it is told once it has lasted a re-poll
// interval (a blip is not worth a warning); it ends with the first answer
// any wait gets after that. A wait that still fails afterwards starts the
// next outage, told a re-poll interval later again, so a flapping link is
// a line per flap at most, never a line per wait.
type outages struct {
	log   *slog.Logger
	after time.Duration // how long an outage lasts before it is told
	told  atomic.Bool   // read without the lock by every answered attempt

	mu    sync.Mutex
	waits map[*outageMark]struct{} // failing for want of Redis now
	since time.Time                // when the outage began
}

// outageMark is one wait as outages sees it: what it waits for, and
// whether it is counted among those failing for want of Redis. A mark
// with no kind is not a wait: its name says what it is.
type outageMark struct {
	kind    Kind
	name    string
	failing bool
}

// what names the mark in the warning.
func (w *outageMark) what() string {
	if w.kind == "" {
		return w.name
	}
	return fmt.Sprintf("%s %q", w.kind.noun(), w.name)
}

// subscriptions is outages as the pub/sub connections' Health: each
// connection is one mark, failing while it cannot reach Redis.
type subscriptions struct {
	o     *outages
	mu    sync.Mutex
	marks map[uint16]*outageMark
}

func (s *subscriptions) mark(conn uint16) *outageMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marks == nil {
		s.marks = map[uint16]*outageMark{}
	}
	m := s.marks[conn]
	if m == nil {
		m = &outageMark{name: "the pub/sub connection"}
		s.marks[conn] = m
	}
	return m
}

func (s *subscriptions) Down(conn uint16, err error) { s.o.failing(s.mark(conn), err) }
func (s *subscriptions) Up(conn uint16)              { s.o.answered(s.mark(conn)) }

// failing notes that w's last attempt failed for want of Redis, with err.
func (o *outages) failing(w *outageMark, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if len(o.waits) == 0 && !o.told.Load() {
		o.since = now
	}
	if o.waits == nil {
		o.waits = map[*outageMark]struct{}{}
	}
	o.waits[w] = struct{}{}
	w.failing = true
	if o.told.Load() || now.Sub(o.since) < o.after {
		return
	}
	o.told.Store(true)
	o.log.Warn("relock: Redis cannot be reached or cannot run scripts; waits go on, still trying",
		"waits", len(o.waits), "of", o.names(3), "for", now.Sub(o.since).Round(time.Millisecond), "error", err)
}

// answered notes that w's last attempt got an answer from Redis, which
// ends a told outage. It costs nothing while there is none.
func (o *outages) answered(w *outageMark) {
	if !w.failing && !o.told.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	w.failing = false
	delete(o.waits, w)
	if o.told.CompareAndSwap(true, false) {
		o.log.Info("relock: Redis answers again; waits go on", "after", time.Since(o.since).Round(time.Millisecond))
		// Waits still failing start the next outage when they fail again.
		// (Their own failing marks stay, to be cleared by their goroutines:
		// a stale one costs a lock at their next answer, nothing more.)
		clear(o.waits)
	}
}

// left forgets w, whose call ended.
func (o *outages) left(w *outageMark) {
	if !w.failing {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	w.failing = false
	delete(o.waits, w)
}

// names says which waits are failing: up to n of them by kind and name,
// sorted, then how many more.
func (o *outages) names(n int) string {
	var all []string
	for w := range o.waits {
		all = append(all, w.what())
	}
	slices.Sort(all)
	all = slices.Compact(all) // many waits on one lock are named once
	if len(all) <= n {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:n], ", "), len(all)-n)
}
