package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/relock-go/relock/reentrant/internal/callback"
	"github.com/relock-go/relock/scripts"
	"github.com/relock-go/relock/watchdog"
)

// holdKey names one hold of a client: the lock's (or semaphore's) key, the
// hash field its holder writes, and, for a group lock, the handle's values,
// so that one owner's holds of two value sets of one group are two holds,
// renewed and released apart.
type holdKey struct {
	name, owner string
	values      valueSet
}

// leaseOwner is the owner the watchdog's lease of k names, which the renewal
// reads back (heldFor): a group lock's carries the values after the owner.
// Owners have no spaces.
func (k holdKey) leaseOwner() string {
	if k.values == "" {
		return k.owner
	}
	return k.owner + " " + string(k.values)
}

// holdTable is a client's record of the holds it has (locks and permits):
// one hold per lock and owner, each with its acquisitions, newest last, and
// one watchdog lease. Holds go in when an acquire wins (add, keep), come
// out through leave, when released (drop), lost (lose, and the watchdog's
// verdict) or stalled, and the watchdog renews them through renewals
// (renew.go; a permit's lease end, in permitleases.go). It has its own
// lock, which is never held while Redis is asked anything.
type holdTable struct {
	mu       sync.Mutex
	closed   bool
	holds    map[holdKey]*hold
	watchdog *watchdog.Watchdog
	renewals *renewals // the watchdog's renew function
	opts     *Options
	conn     func() scripts.Conn // where renewals run
	// guard runs the user's hooks that run on relock's goroutines (the
	// watchdog's loop, a stall's give-back), recovering their panics.
	guard *callback.Guard
}

// newHoldTable returns an empty table whose watchdog renews through conn;
// cluster: conn is a cluster client.
func newHoldTable(opts *Options, conn func() scripts.Conn, cluster bool) *holdTable {
	t := &holdTable{holds: make(map[holdKey]*hold), opts: opts, conn: conn, guard: &callback.Guard{Logger: opts.Logger}}
	t.renewals = &renewals{opts: opts, conn: conn, guard: t.guard, permits: t}
	t.renewals.spanSlots.Store(!cluster)
	t.watchdog = watchdog.New(watchdog.Config{
		Timeout:   opts.WatchdogTimeout,
		BatchSize: opts.RenewBatchSize,
		Renew:     t.renewals.renew,
		Late:      t.late,
	})
	return t
}

// close stops the watchdog and ends every hold with cause; later adds fail
// with ErrClosed.
func (t *holdTable) close(cause error) {
	t.mu.Lock()
	t.closed = true
	holds := t.holds
	t.holds = nil
	t.mu.Unlock()
	t.watchdog.Close()
	for _, h := range holds {
		h.stopWatch()
		h.cancelAll(cause)
	}
}

// hold is this client's record of one owner's hold on one lock: one entry
// per acquisition not yet released, newest last, and one watchdog lease for
// all of them. Holds taken elsewhere with the same owner (a hand-off to
// another process) are not here; Redis counts them all.
type hold struct {
	key   holdKey
	t     *holdTable
	acqs  []acquisition
	lease *watchdog.Lease
	token string // a permit's lease end as relock last wrote it; guarded by t.mu
	// stall is its progress deadline (ProgressWithin); nil: none.
	stall *stallWatch
	// gone is why the hold left the table without a release (lost, or its
	// lease ended), set as it leaves; guarded by t.mu. Its held contexts
	// are cancelled with it only after that, outside the lock: an Unlock
	// in between reads it here (see goneCause).
	gone error
	// The first acquisition's room, so that it allocates nothing of its
	// own: most holds never have another. firstValues serves one held
	// context only, since a released one may still be read.
	firstAcq    [1]acquisition
	firstValues heldValues
}

type holdCtxKey struct{}

// heldValues is what a held context carries for relock: its hold, and the
// context given to the Lock that made it (see WithoutOwner). One value
// holds both, to keep an acquire's allocations down.
type heldValues struct {
	context.Context
	h     *hold
	given context.Context
}

func (v *heldValues) Value(key any) any {
	switch key.(type) {
	case holdCtxKey:
		return v.h
	case givenKey:
		return v.given
	}
	return v.Context.Value(key)
}

type acquisition struct {
	lease  time.Duration // 0: kept by the watchdog
	cancel context.CancelCauseFunc
	parent context.Context // the ctx given to Lock
	kind   Kind            // for HoldEnded
	sent   time.Time       // when its acquire was sent
}

// renewed reports whether the watchdog keeps the hold: while any of its
// acquisitions was made without LeaseFor.
func (h *hold) renewed() bool {
	for _, a := range h.acqs {
		if a.lease == 0 {
			return true
		}
	}
	return false
}

// ttl is the TTL the hold's key should have: the watchdog timeout while it
// is renewed, else the newest acquisition's lease (as Redisson, each
// acquire or release resets the TTL to the lease).
func (h *hold) ttl(timeout time.Duration) time.Duration {
	if h.renewed() {
		return timeout
	}
	return h.acqs[len(h.acqs)-1].lease
}

// stopWatch stops the hold's progress deadline, if it has one, as it
// leaves the table (a test here keeps a hold without one out of
// progress.go).
func (h *hold) stopWatch() {
	if h.stall != nil {
		h.stall.stop()
	}
}

// cancelAll ends every acquisition of the hold with cause.
func (h *hold) cancelAll(cause error) {
	for _, a := range h.acqs {
		h.t.ended(h.key, a, cause, nil, 0)
		a.cancel(cause)
	}
}

// ended tells the HoldEnded hook that acquisition a of key ended: by a
// release that took releasing (err its error), or with cause.
func (t *holdTable) ended(key holdKey, a acquisition, cause, err error, releasing time.Duration) {
	if hook := t.opts.Hooks.HoldEnded; hook != nil {
		_ = t.guard.Run("Hooks.HoldEnded", func() {
			hook(a.parent, HoldEnd{
				Kind: a.kind, Name: key.name, Owner: Owner{id: key.owner}, Held: time.Since(a.sent),
				Cause: cause, Err: err, Releasing: releasing,
			})
		})
	}
}

// acquireTTL returns the TTL an acquire of key with the given lease sends.
// A lease cannot shorten a hold the watchdog keeps: it would expire between
// renewals.
func (t *holdTable) acquireTTL(key holdKey, lease time.Duration) time.Duration {
	if lease == 0 {
		return t.opts.WatchdogTimeout
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.holds[key]; h != nil && h.renewed() {
		return t.opts.WatchdogTimeout
	}
	return lease
}

// renewGroupOf returns the group of a hold on name that r renews.
func renewGroupOf(name string, r renewer) renewGroup {
	return renewGroup{renewer: r, slot: scripts.Slot(name)}
}

// id is the group as the watchdog knows it (watchdog.Lease.Group).
func (g renewGroup) id() uint32 { return uint32(g.renewer)<<16 | uint32(g.slot) }

// taken is an acquisition to record: a thing of the given kind at key,
// renewed in group, whose acquire was sent at sent with TTL ttl and lease
// lease (0: kept by the watchdog). Its held context derives from parent;
// given is the ctx the acquire call was given.
type taken struct {
	parent, given context.Context
	kind          Kind
	key           holdKey
	group         renewGroup
	lease, ttl    time.Duration
	sent          time.Time
	token         string // a permit's lease end, as written (scripts.Held.Token)
	// progress, for a new hold, is its progress deadline (ProgressWithin),
	// and giveBack releases it once it stalls; 0 and nil: none.
	progress time.Duration
	giveBack giveBackFunc
}

// add records acquisition n, hands it to the watchdog, and returns its
// held context: n.parent with a cancel that fires on release or loss. A
// new hold whose deadline has passed already is not recorded: add returns
// errLateReply (see keep).
func (t *holdTable) add(n taken) (context.Context, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("relock: lock %q: %w", n.key.name, ErrClosed)
	}
	deadline := watchdog.Deadline(n.sent, n.ttl)
	h := t.holds[n.key]
	if h == nil && !time.Now().Before(deadline) {
		return nil, errLateReply
	}
	var values *heldValues
	if h == nil {
		h = &hold{key: n.key, t: t, token: n.token}
		h.acqs, values = h.firstAcq[:0], &h.firstValues
		t.holds[n.key] = h
		if n.progress > 0 {
			giveBack, within := n.giveBack, n.progress
			h.stall = watchProgress(within, func() { t.stalled(h, within, giveBack) })
		}
	} else {
		values = new(heldValues)
	}
	*values = heldValues{Context: n.parent, h: h, given: n.given}
	ctx, cancel := context.WithCancelCause(values)
	h.acqs = append(h.acqs, acquisition{lease: n.lease, cancel: cancel, parent: n.given, kind: n.kind, sent: n.sent})
	if h.lease == nil {
		h.lease = t.watchdog.Add(n.key.name, n.key.leaseOwner(), n.group.id(), h.renewed(), deadline,
			func(reason error) { t.lost(h, reason) })
	} else {
		t.watchdog.Update(h.lease, h.renewed(), deadline)
	}
	return ctx, nil
}

// keep is add for a hold an acquire just took. A reply that came
// after the new hold's deadline is not trusted: the key may have expired,
// and another taken the lock, before the caller could be told, and a held
// context returned anyway, even one the watchdog cancels a moment later,
// would let the caller start work under a lock it may not hold. So one
// renewal asks Redis. If the owner's hold is still there, it never lapsed
// (only this owner's acquires write its field), and it is recorded with its
// deadline counted from the renewal's sending. If it is gone, keep
// returns errHoldExpired; if the renewal fails, or comes late too, an error
// that wraps errLateReply. (A hold that exists already is the watchdog's to
// judge.)
func (t *holdTable) keep(n taken) (context.Context, error) {
	held, err := t.add(n)
	if !errors.Is(err, errLateReply) {
		return held, err
	}
	late := time.Since(n.sent)
	n.sent = time.Now()
	confirm := [][]scripts.Held{{heldFor(n.key.name, n.key.leaseOwner(), n.group.renewer)}}
	confirm[0][0].Token = n.token
	renewed, errs := renewers[n.group.renewer](n.parent, t.conn(), n.ttl, confirm)
	switch c := confirm[0][0]; {
	case errs[0] != nil:
		err = fmt.Errorf("%w; confirming the hold: %w", errLateReply, errs[0])
	case !renewed[0][0]:
		err = errHoldExpired
	case c.Left > 0: // a permit whose lease another client set since
		n.lease, n.ttl = c.Left, c.Left
		held, err = t.add(n)
	default:
		n.token = c.Token
		held, err = t.add(n)
	}
	t.opts.Logger.Warn("relock: an acquire's reply came after its hold's deadline", "lock", n.key.name, "owner", n.key.owner,
		"reply after", late.Round(time.Millisecond), "ttl", n.ttl, "kept", err == nil, "error", err)
	return held, err
}

// drop forgets the newest acquisition of key, if any, and returns it
// with the TTL the release should restore and the hold's watchdog lease
// (whose Deadline a release that must retry reads). The watchdog lets go
// of the hold before the release is sent: all of it when this was the last
// acquisition here, its renewal when no remaining acquisition wants the
// watchdog.
func (t *holdTable) drop(key holdKey) (a acquisition, restore time.Duration, lease *watchdog.Lease, found bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	restore = t.opts.WatchdogTimeout
	h := t.holds[key]
	if h == nil {
		return a, restore, nil, false
	}
	a = h.acqs[len(h.acqs)-1]
	h.acqs = h.acqs[:len(h.acqs)-1]
	if len(h.acqs) == 0 {
		t.leave(h, nil)
		return a, restore, h.lease, true
	}
	restore = h.ttl(t.opts.WatchdogTimeout)
	t.watchdog.Update(h.lease, h.renewed(), watchdog.Deadline(time.Now(), restore))
	return a, restore, h.lease, true
}

// leave takes h out of the table, the one way out: the watchdog lets go
// of it and its progress deadline stops, and gone says why it left
// without a release (nil: released). It reports false, changing nothing,
// when h had left already. The caller holds t.mu.
func (t *holdTable) leave(h *hold, gone error) bool {
	if t.holds[h.key] != h {
		return false
	}
	delete(t.holds, h.key)
	t.watchdog.Remove(h.lease)
	h.stopWatch()
	h.gone = gone
	return true
}

// lost ends a hold the watchdog gave up on: every held context of it is
// cancelled with a cause that wraps ErrLockLost and the reason.
func (t *holdTable) lost(h *hold, reason error) {
	owner := h.key.owner
	ended := errors.Is(reason, ErrLeaseEnded)
	cause := fmt.Errorf("relock: %w: %q held by %s: %w", ErrLockLost, h.key.name, owner, reason)
	if ended {
		// How a LeaseFor hold ends when its Unlock did not come first: the
		// caller asked for a lease that long. Not a loss; the held context
		// says it ended.
		cause = fmt.Errorf("relock: %q held by %s: %w", h.key.name, owner, ErrLeaseEnded)
	}
	t.mu.Lock()
	t.leave(h, cause)
	t.mu.Unlock()
	h.cancelAll(cause)
	if ended {
		t.opts.Logger.Debug("relock: lease ended", "lock", h.key.name, "owner", owner)
		return
	}
	t.opts.Logger.Warn("relock: lock lost", "lock", h.key.name, "owner", owner, "reason", reason.Error())
	if onLost := t.opts.OnLockLost; onLost != nil {
		_ = t.guard.Run("Options.OnLockLost", func() { onLost(h.key.name, Owner{id: owner}, cause) })
	}
}

// late tells that the renewals of the hold of lease l fell behind (see
// Hooks.RenewalLate), once per gap.
func (t *holdTable) late(l *watchdog.Lease, confirmed time.Time) {
	owner, values, _ := strings.Cut(l.Owner, " ")
	t.mu.Lock()
	h := t.holds[holdKey{name: l.Key, owner: owner, values: valueSet(values)}]
	if h == nil || h.lease != l || len(h.acqs) == 0 {
		t.mu.Unlock()
		return
	}
	a, deadline := h.acqs[0], t.watchdog.Deadline(l)
	t.mu.Unlock()
	t.opts.Logger.Warn("relock: renewals of a hold are late; it is lost at its deadline unless one is confirmed", "lock", l.Key, "owner", owner,
		"confirmed", time.Since(confirmed).Round(time.Millisecond), "lost in", time.Until(deadline).Round(time.Millisecond))
	if hook := t.opts.Hooks.RenewalLate; hook != nil {
		r := LateRenewal{Kind: a.kind, Name: l.Key, Owner: Owner{id: owner}, Confirmed: confirmed, Deadline: deadline}
		_ = t.guard.Run("Hooks.RenewalLate", func() { hook(a.parent, r) })
	}
}

// lose cancels, with cause, every held context of the holds that match,
// and forgets those holds.
func (t *holdTable) lose(match func(holdKey) bool, cause error) {
	t.mu.Lock()
	var lost []*hold
	for k, h := range t.holds {
		if match(k) {
			lost = append(lost, h)
			t.leave(h, cause)
		}
	}
	t.mu.Unlock()
	for _, h := range lost {
		h.cancelAll(cause)
	}
}

// stalled ends hold h, whose progress deadline passed with no report: it
// leaves the table and the watchdog; its held contexts are cancelled with
// ErrStalled first, so the work hears at once that it may no longer act
// under the lock; then, in the background, giveBack releases it in Redis
// once for each of its acquisitions, newest first, and HoldEnded is told
// of each as its release ends, with that release's time and error.
func (t *holdTable) stalled(h *hold, within time.Duration, giveBack giveBackFunc) {
	cause := fmt.Errorf("relock: %q held by %s: %w (%v)", h.key.name, h.key.owner, ErrStalled, within)
	t.mu.Lock()
	if !t.leave(h, cause) {
		t.mu.Unlock()
		return // released or lost meanwhile
	}
	acqs := h.acqs
	t.mu.Unlock()
	t.opts.Logger.Warn("relock: hold stalled: no progress within its deadline; giving it back", "lock", h.key.name, "owner", h.key.owner,
		"within", within)
	for _, a := range acqs {
		a.cancel(cause)
	}
	next := len(acqs)
	giveBack(context.Background(), len(acqs), func(err error, took time.Duration) {
		next--
		t.ended(h.key, acqs[next], cause, err, took)
	})
}

// giveBackFunc releases a stalled hold in Redis, once for each of its
// acquisitions, in the background, and calls released after each release
// (or, once one failed, for each one left, with that error) with its
// error and how long it took.
type giveBackFunc func(ctx context.Context, acquisitions int, released func(err error, took time.Duration))
