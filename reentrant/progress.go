package reentrant

import (
	"sync"
	"sync/atomic"
	"time"
)

// ProgressWithin gives the hold a progress deadline: the work done under
// it reports progress with Progress, and a hold that goes d without a
// report is given back at once, its held context cancelled with a cause
// that wraps ErrStalled. So a job that hangs while it holds (a deadlock, a
// read with no timeout, a loop that never ends) lets the lock go within d,
// plus a round trip to give it back, instead of keeping it renewed for as
// long as its process lives. d is at least 1ms.
//
// While reports come within d nothing changes: the watchdog renews as
// ever, and a report is a local clock read, never a command. The
// deadline belongs to the hold: a re-entry (the same owner taking it
// again) shares the outer Lock's, and its own option is ignored. A hold
// given back so is released once for each of its acquisitions, as many
// Unlocks would; if Redis cannot be reached then, the lock expires with its
// TTL. Taken after the stall, the lock's fencing token goes up, so a
// fenced store refuses the stalled holder's writes once the next holder
// has written. It is for a Lock's hold only: a MultiLock, a Redlock, a
// PermitExpirableSemaphore's permit or another synchronizer given it
// fails with ErrInvalidArgument, and so does a call given it twice.
func ProgressWithin(d time.Duration) LockOption {
	return LockOption{func(cfg *acquireConfig) {
		switch {
		case cfg.progress != 0:
			cfg.invalid("two progress deadlines given (ProgressWithin twice): give one")
		case d < time.Millisecond:
			cfg.invalid("ProgressWithin(%v): a progress deadline must be at least 1ms", d)
		}
		cfg.progress = d
	}}
}

// stallWatch is a hold's progress deadline: a timer that, when it fires,
// finds either the deadline moved on by a report (and waits for the rest
// of it) or passed (and stalls the hold). A report stores the new deadline
// and touches no timer, unless it brings the deadline before the timer's.
type stallWatch struct {
	within time.Duration
	start  time.Time    // what due counts from
	due    atomic.Int64 // the deadline, as time since start
	ended  atomic.Bool  // the hold stalled or left the table
	mu     sync.Mutex   // guards timer, which the timer's own call re-arms
	timer  *time.Timer
	armed  atomic.Int64 // when the timer fires, as time since start; written under mu
	stall  func()
}

// watchProgress starts a progress deadline of d; stall ends the hold when
// it passes with no report.
func watchProgress(d time.Duration, stall func()) *stallWatch {
	w := &stallWatch{within: d, start: time.Now(), stall: stall}
	w.due.Store(int64(d))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed.Store(int64(d))
	w.timer = time.AfterFunc(d, w.fire)
	return w
}

// fire is the timer's call: it waits for the rest of the deadline, or
// stalls the hold.
func (w *stallWatch) fire() {
	w.mu.Lock()
	if w.ended.Load() {
		w.mu.Unlock()
		return
	}
	now := time.Since(w.start)
	if left := time.Duration(w.due.Load()) - now; left > 0 {
		w.armed.Store(int64(now + left))
		w.timer.Reset(left)
		w.mu.Unlock()
		return
	}
	w.ended.Store(true)
	w.mu.Unlock()
	w.stall()
}

// progressed is a report with the next due within the hold's deadline.
func (w *stallWatch) progressed() bool { return w.reported(w.within) }

// reported moves the deadline to d from now; one earlier than the timer's
// re-arms it (at once, for d <= 0).
func (w *stallWatch) reported(d time.Duration) bool {
	if w.ended.Load() {
		return false
	}
	due := time.Since(w.start) + max(d, 0)
	w.due.Store(int64(due))
	if int64(due) >= w.armed.Load() {
		return true // the common case: the timer fires first, and finds it
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended.Load() && int64(due) < w.armed.Load() {
		w.armed.Store(int64(due))
		w.timer.Reset(max(d, 0))
	}
	return true
}

// stop ends the watch of a hold that left the table: its timer does
// nothing more.
func (w *stallWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended.Swap(true) {
		w.timer.Stop()
	}
}
