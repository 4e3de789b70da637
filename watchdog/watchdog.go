package watchdog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Why a lease was lost, as passed to its OnLost.
var (
	// ErrNotRenewed: a renewal reached Redis and found the hold gone.
	ErrNotRenewed = errors.New("renewal found the hold gone")
	// ErrUnconfirmed: no renewal was confirmed before the local deadline.
	ErrUnconfirmed = errors.New("renewal not confirmed before the local deadline")
	// ErrLeaseEnded: an explicit lease (not renewed) reached its deadline.
	ErrLeaseEnded = errors.New("lease ended")
)

// Deadline returns the local deadline of a hold whose TTL of ttl was set by a
// command sent at sent: sent + ttl minus a margin of ttl/10. The server
// applies the TTL after the command was sent, so the key cannot expire
// before sent + ttl; the margin covers clock-rate drift between client and
// server and gives the holder time to stop before the key can expire.
func Deadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - ttl/10)
}

// RenewFunc renews every lease of each batch to ttl, one call for all
// batches of a round. For each batch it returns whether each lease was
// renewed (false: its hold is gone), or that batch's error, which leaves its
// leases to be retried.
type RenewFunc func(ctx context.Context, ttl time.Duration, batches [][]*Lease) (renewed [][]bool, errs []error)

// Config configures a Watchdog.
type Config struct {
	// Timeout is the TTL a renewal sets; rounds run every Timeout/3.
	Timeout time.Duration
	// BatchSize is the most leases renewed by one script call. Default 100.
	BatchSize int
	// Renew sends the renewals.
	Renew RenewFunc
	// Late, if set, is called from the loop once for each renewed lease
	// whose renewals fall behind: no renewal confirmed for half of
	// Timeout since the last confirmed one was sent, which the rounds
	// every Timeout/3 leave to a round trip (see [LateAfter]). confirmed
	// is when that one was sent; the lease is lost at its deadline unless
	// a renewal is confirmed first, and is told late again after the next
	// confirmed renewal only. It must not block.
	Late func(l *Lease, confirmed time.Time)
}

// LateAfter is how long after the send of a renewed lease's last confirmed
// renewal the lease counts as late: half of timeout. A round is due a third
// of timeout after that send, so a late lease's renewals have missed a
// round by a sixth of timeout; its deadline (see [Deadline]) is 0.4
// timeout away, which leaves its holder more than a third of timeout to
// act on the warning before the lease is lost.
func LateAfter(timeout time.Duration) time.Duration { return timeout / 2 }

// Lease is one hold the watchdog looks after.
type Lease struct {
	// Key and Owner say which hold this is, for the renew function.
	Key, Owner string
	// Group keeps batches apart: leases of one batch share a group (a
	// cluster slot, and whatever else the renew function must not mix).
	Group uint32

	onLost func(reason error)

	// Guarded by the watchdog's mu.
	renew    bool
	deadline time.Time
	lastErr  error
	active   bool
	late     bool // told late since its deadline last moved
}

// Watchdog is one renewal loop. Its methods are safe for concurrent use.
type Watchdog struct {
	cfg    Config
	period time.Duration

	mu     sync.Mutex
	leases map[*Lease]struct{}
	wakeAt time.Time // when the loop plans to wake next
	closed bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// New starts a watchdog. Close stops it.
func New(cfg Config) *Watchdog {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 100
	}
	w := &Watchdog{
		cfg:    cfg,
		period: cfg.Timeout / 3,
		leases: make(map[*Lease]struct{}),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go w.run()
	return w
}

// Add starts looking after a hold until deadline (see [Deadline]); with
// renew it is renewed every round and each confirmed renewal moves the
// deadline. onLost is called once, from the loop, if the lease is lost; it
// must not block. After Close, Add returns nil.
func (w *Watchdog) Add(key, owner string, group uint32, renew bool, deadline time.Time, onLost func(reason error)) *Lease {
	l := &Lease{Key: key, Owner: owner, Group: group, onLost: onLost}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	l.active = true
	w.leases[l] = struct{}{}
	w.setLocked(l, renew, deadline)
	return l
}

// Update changes whether l is renewed and sets its deadline; the deadline of
// a renewed lease only moves forward, since any command that set its TTL
// was sent no later than now. It reports false, changing nothing, if l is no
// longer looked after (removed or lost).
func (w *Watchdog) Update(l *Lease, renew bool, deadline time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !l.active {
		return false
	}
	w.setLocked(l, renew, deadline)
	return true
}

func (w *Watchdog) setLocked(l *Lease, renew bool, deadline time.Time) {
	if renew && l.deadline.After(deadline) {
		deadline = l.deadline
	}
	if deadline.After(l.deadline) {
		l.late = false
	}
	l.renew, l.deadline = renew, deadline
	if deadline.Before(w.wakeAt) {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Remove stops looking after l: it is not renewed again and not reported
// lost. It reports whether l was still looked after.
func (w *Watchdog) Remove(l *Lease) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !l.active {
		return false
	}
	l.active = false
	delete(w.leases, l)
	return true
}

// Deadline returns l's local deadline: while it is in the future and l is
// looked after, the hold is believed. Once l is lost it keeps the deadline
// it was lost at.
func (w *Watchdog) Deadline(l *Lease) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return l.deadline
}

// Len returns how many leases are looked after.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.leases)
}

// Close stops the loop and waits for it, and for a renewal round in flight.
// Leases are dropped without being reported lost.
func (w *Watchdog) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return
	}
	w.closed = true
	for l := range w.leases {
		l.active = false
	}
	clear(w.leases)
	w.mu.Unlock()
	close(w.stop)
	<-w.done
}

type round struct {
	sent    time.Time
	batches [][]*Lease
	renewed [][]bool
	errs    []error
}

func (w *Watchdog) run() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.NewTimer(w.period)
	defer timer.Stop()

	next := time.Now().Add(w.period) // next round
	backoff := time.Duration(0)
	var inflight chan round
	for {
		now := time.Now()
		w.expire(now)
		w.warn(now)
		if inflight == nil && !now.Before(next) {
			inflight = w.startRound(ctx)
		}
		wakeAt := w.plan(next, inflight != nil)
		timer.Reset(time.Until(wakeAt))
		select {
		case <-timer.C:
		case <-w.wake:
		case r := <-inflight:
			inflight = nil
			if w.apply(r) {
				backoff = 0
				next = r.sent.Add(w.period)
			} else {
				backoff = min(max(2*backoff, w.cfg.Timeout/100), w.period/2)
				next = time.Now().Add(backoff)
			}
		case <-w.stop:
			cancel()
			if inflight != nil {
				<-inflight
			}
			return
		}
	}
}

// plan returns when the loop must wake next: at the next round (unless one
// is in flight) or at the earliest deadline, whichever comes first.
func (w *Watchdog) plan(next time.Time, roundInFlight bool) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	wakeAt := next
	if roundInFlight {
		wakeAt = time.Now().Add(w.period)
	}
	for l := range w.leases {
		if l.deadline.Before(wakeAt) {
			wakeAt = l.deadline
		}
		if at, ok := w.lateAt(l); ok && at.Before(wakeAt) {
			wakeAt = at
		}
	}
	w.wakeAt = wakeAt
	return wakeAt
}

// lateAt is when renewed lease l counts as late, if it is to be told:
// LateAfter past its last confirmed renewal's send, which its deadline
// keeps (Deadline). The caller holds mu.
func (w *Watchdog) lateAt(l *Lease) (time.Time, bool) {
	if !l.renew || l.late || w.cfg.Late == nil {
		return time.Time{}, false
	}
	return w.confirmed(l).Add(LateAfter(w.cfg.Timeout)), true
}

// confirmed is when renewed lease l's last confirmed renewal (or its
// acquire) was sent: what its deadline counts from. The caller holds mu.
func (w *Watchdog) confirmed(l *Lease) time.Time {
	return l.deadline.Add(-w.cfg.Timeout + w.cfg.Timeout/10)
}

// warn tells Late of every renewed lease that has become late.
func (w *Watchdog) warn(now time.Time) {
	type late struct {
		l         *Lease
		confirmed time.Time
	}
	var told []late
	w.mu.Lock()
	for l := range w.leases {
		if at, ok := w.lateAt(l); ok && !now.Before(at) {
			l.late = true
			told = append(told, late{l, w.confirmed(l)})
		}
	}
	w.mu.Unlock()
	for _, x := range told {
		w.cfg.Late(x.l, x.confirmed)
	}
}

// expire loses every lease whose deadline has passed.
func (w *Watchdog) expire(now time.Time) {
	type loss struct {
		l      *Lease
		reason error
	}
	var lost []loss
	w.mu.Lock()
	for l := range w.leases {
		if now.Before(l.deadline) {
			continue
		}
		reason := ErrLeaseEnded
		if l.renew {
			reason = ErrUnconfirmed
			if l.lastErr != nil {
				reason = fmt.Errorf("%w (last renewal error: %w)", ErrUnconfirmed, l.lastErr)
			}
		}
		l.active = false
		delete(w.leases, l)
		lost = append(lost, loss{l, reason})
	}
	w.mu.Unlock()
	for _, x := range lost {
		x.l.onLost(x.reason)
	}
}

// startRound sends one renewal of every renewed lease, grouped and batched,
// from its own goroutine so that deadlines are kept while it waits. The
// round's result arrives on the returned channel.
func (w *Watchdog) startRound(ctx context.Context) chan round {
	w.mu.Lock()
	groups := make(map[uint32][]*Lease)
	for l := range w.leases {
		if l.renew {
			groups[l.Group] = append(groups[l.Group], l)
		}
	}
	w.mu.Unlock()
	var batches [][]*Lease
	for _, g := range groups {
		for len(g) > 0 {
			n := min(len(g), w.cfg.BatchSize)
			batches = append(batches, g[:n:n])
			g = g[n:]
		}
	}
	result := make(chan round, 1)
	r := round{sent: time.Now(), batches: batches}
	if len(batches) == 0 {
		result <- r
		return result
	}
	go func() {
		rctx, cancel := context.WithTimeout(ctx, w.period)
		defer cancel()
		r.renewed, r.errs = w.cfg.Renew(rctx, w.cfg.Timeout, batches)
		result <- r
	}()
	return result
}

// apply records a round's outcome and reports whether every batch got an
// answer. A lease already lost or removed is left alone, so no renewal
// brings back a hold declared lost. A confirmed renewal moves a renewed
// lease's deadline forward; a lease that stopped being renewed while the
// round was in flight may have had its TTL set by this renewal after the
// command that ended its renewal, so its deadline can only move back.
func (w *Watchdog) apply(r round) (ok bool) {
	ok = true
	deadline := Deadline(r.sent, w.cfg.Timeout)
	var gone []*Lease
	w.mu.Lock()
	for i, batch := range r.batches {
		if r.errs[i] != nil {
			ok = false
		}
		for j, l := range batch {
			switch {
			case !l.active:
			case r.errs[i] != nil:
				l.lastErr = r.errs[i]
			case !r.renewed[i][j]:
				l.active = false
				delete(w.leases, l)
				gone = append(gone, l)
			case l.renew:
				l.lastErr = nil
				if deadline.After(l.deadline) {
					l.deadline, l.late = deadline, false
				}
			case deadline.Before(l.deadline):
				l.deadline = deadline
			}
		}
	}
	w.mu.Unlock()
	for _, l := range gone {
		l.onLost(ErrNotRenewed)
	}
	return ok
}
