// Package outage tells the log of a client's waits that go on while Redis
// cannot be reached (or cannot run scripts): once per outage, however many
// waits it holds up.
package outage

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Tracker tells the log of waits that go on while Redis cannot be reached
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
//
// The zero Tracker is not ready: set Log, After and Describe.
type Tracker struct {
	Log   *slog.Logger
	After time.Duration // how long an outage lasts before it is told
	// Describe names a wait of kind on name in the warning.
	Describe func(kind, name string) string
	told     atomic.Bool // read without the lock by every answered attempt

	mu    sync.Mutex
	waits map[*Mark]struct{} // failing for want of Redis now
	since time.Time          // when the outage began
}

// Mark is one wait as a Tracker sees it: what it waits for, and whether
// it is counted among those failing for want of Redis. A mark with no Kind
// is not a wait: its Name says what it is.
type Mark struct {
	Kind, Name string
	failing    bool
}

// what names w in the warning.
func (o *Tracker) what(w *Mark) string {
	if w.Kind == "" {
		return w.Name
	}
	return o.Describe(w.Kind, w.Name)
}

// Health is a Tracker as the pub/sub connections' pubsub.Health: each
// connection is one mark, failing while it cannot reach Redis.
type Health struct {
	o     *Tracker
	mu    sync.Mutex
	marks map[uint16]*Mark
}

// Health returns o as the pub/sub connections see it.
func (o *Tracker) Health() *Health { return &Health{o: o} }

func (s *Health) mark(conn uint16) *Mark {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marks == nil {
		s.marks = map[uint16]*Mark{}
	}
	m := s.marks[conn]
	if m == nil {
		m = &Mark{Name: "the pub/sub connection"}
		s.marks[conn] = m
	}
	return m
}

// Down and Up are pubsub.Health's: conn lost Redis, or has it back.
func (s *Health) Down(conn uint16, err error) { s.o.Failing(s.mark(conn), err) }
func (s *Health) Up(conn uint16)              { s.o.Answered(s.mark(conn)) }

// Failing notes that w's last attempt failed for want of Redis, with err.
func (o *Tracker) Failing(w *Mark, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if len(o.waits) == 0 && !o.told.Load() {
		o.since = now
	}
	if o.waits == nil {
		o.waits = map[*Mark]struct{}{}
	}
	o.waits[w] = struct{}{}
	w.failing = true
	if o.told.Load() || now.Sub(o.since) < o.After {
		return
	}
	o.told.Store(true)
	o.Log.Warn("relock: Redis cannot be reached or cannot run scripts; waits go on, still trying",
		"waits", len(o.waits), "of", o.names(3), "for", now.Sub(o.since).Round(time.Millisecond), "error", err)
}

// Answered notes that w's last attempt got an answer from Redis, which
// ends a told outage. It costs nothing while there is none.
func (o *Tracker) Answered(w *Mark) {
	if !w.failing && !o.told.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	w.failing = false
	delete(o.waits, w)
	if o.told.CompareAndSwap(true, false) {
		o.Log.Info("relock: Redis answers again; waits go on", "after", time.Since(o.since).Round(time.Millisecond))
		// Waits still failing start the next outage when they fail again.
		// (Their own failing marks stay, to be cleared by their goroutines:
		// a stale one costs a lock at their next answer, nothing more.)
		clear(o.waits)
	}
}

// Left forgets w, whose call ended.
func (o *Tracker) Left(w *Mark) {
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
func (o *Tracker) names(n int) string {
	var all []string
	for w := range o.waits {
		all = append(all, o.what(w))
	}
	slices.Sort(all)
	all = slices.Compact(all) // many waits on one lock are named once
	if len(all) <= n {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:n], ", "), len(all)-n)
}
