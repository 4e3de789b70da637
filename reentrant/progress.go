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
// finds either a report within the deadline (and waits for the rest of
// it) or none (and stalls the hold). A report stores a time and touches
// no timer.
type stallWatch struct {
	within time.Duration
	start  time.Time    // what last counts from
	last   atomic.Int64 // the last report, as time since start
	ended  atomic.Bool  // the hold stalled or left the table
	mu     sync.Mutex   // guards timer, which the timer's own call re-arms
	timer  *time.Timer
}

// watchProgress starts a progress deadline of d; stall ends the hold when
// it passes with no report.
func watchProgress(d time.Duration, stall func()) *stallWatch {
	w := &stallWatch{within: d, start: time.Now()}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(d, func() { w.fire(stall) })
	return w
}

// fire is the timer's call: it waits for the rest of the deadline after
// the last report, or stalls the hold.
func (w *stallWatch) fire(stall func()) {
	w.mu.Lock()
	if w.ended.Load() {
		w.mu.Unlock()
		return
	}
	if left := w.within - (time.Since(w.start) - time.Duration(w.last.Load())); left > 0 {
		w.timer.Reset(left)
		w.mu.Unlock()
		return
	}
	w.ended.Store(true)
	w.mu.Unlock()
	stall()
}

func (w *stallWatch) progressed() bool {
	if w.ended.Load() {
		return false
	}
	w.last.Store(int64(time.Since(w.start)))
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
