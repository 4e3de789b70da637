package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// valueSet is a group lock's value fields as one comparable value: sorted,
// joined by spaces (fields are base64, which has none); empty for every
// other kind.
type valueSet string

func valuesOf(fields []string) valueSet { return valueSet(strings.Join(fields, " ")) }

func (v valueSet) fields() []string { return strings.Fields(string(v)) }

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
// out when released (drop) or lost (lose, and the watchdog's verdict), and
// the watchdog renews them through renew. It has its own lock, which is
// never held while Redis is asked anything.
type holdTable struct {
	mu       sync.Mutex
	closed   bool
	holds    map[holdKey]*hold
	watchdog *watchdog.Watchdog
	opts     *Options
	conn     func() scripts.Conn // where renewals run
	// guard runs the user's hooks that run on relock's goroutines (the
	// watchdog's loop, a stall's give-back), recovering their panics.
	guard *callback.Guard
	// spanSlots: one renewal script may take locks of several hash slots
	// (see renew). Not on a cluster client, and not once the server
	// refused it (a cluster proxy).
	spanSlots atomic.Bool
}

// newHoldTable returns an empty table whose watchdog renews through conn;
// cluster: conn is a cluster client.
func newHoldTable(opts *Options, conn func() scripts.Conn, cluster bool) *holdTable {
	t := &holdTable{holds: make(map[holdKey]*hold), opts: opts, conn: conn, guard: &callback.Guard{Logger: opts.Logger}}
	t.spanSlots.Store(!cluster)
	t.watchdog = watchdog.New(watchdog.Config{
		Timeout:   opts.WatchdogTimeout,
		BatchSize: opts.RenewBatchSize,
		Renew:     t.renew,
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

// Progress reports that the work under the hold behind ctx (a held context
// of a Lock taken with ProgressWithin, or one made from it) made progress,
// which moves the hold's progress deadline to d from now. It reports
// whether ctx is such a context of a hold still kept (false for a nil
// ctx). It sends nothing to Redis and is cheap enough to call on every
// step of a loop.
func Progress(ctx context.Context) bool {
	w := stallWatchOf(ctx)
	return w != nil && w.progressed()
}

// ProgressDue reports progress, as Progress does, and says when the next
// report is due: within d from now, for this report only (the reports
// after it are due within ProgressWithin again). So work about to do one
// long step (a migration, a large upload) can say so without a deadline
// that long for every step. A d of 0 or less stalls the hold at once: the
// work declares that it cannot go on, and the hold is given back as after
// a missed deadline (systemd's WATCHDOG=trigger). It reports what
// Progress reports.
func ProgressDue(ctx context.Context, d time.Duration) bool {
	w := stallWatchOf(ctx)
	return w != nil && w.reported(d)
}

// stallWatchOf returns the progress deadline of the hold behind ctx, or
// nil.
func stallWatchOf(ctx context.Context) *stallWatch {
	if ctx == nil {
		return nil
	}
	h, ok := ctx.Value(holdCtxKey{}).(*hold)
	if !ok {
		return nil
	}
	return h.stall
}

// LeaseDeadline returns the local deadline of the hold behind a held
// context: the time until which this client believes the lock is held, from
// the send time of the last confirmed acquire or renewal, plus the TTL,
// minus the safety margin (see docs/lease-model.md). Renewals move it
// forward. A holder about to do something that must finish under the lock
// can check that enough time is left. ok is false for a context that no
// Lock returned.
func LeaseDeadline(ctx context.Context) (deadline time.Time, ok bool) {
	h, ok := ctx.Value(holdCtxKey{}).(*hold)
	if !ok {
		return time.Time{}, false
	}
	return h.t.watchdog.Deadline(h.lease), true
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

// lockedWith reports whether ctx is the context some Lock of lock name on
// this client was given (before it added an owner), with that hold still
// here: an Unlock with ctx then got the wrong context.
func (t *holdTable) lockedWith(ctx context.Context, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, h := range t.holds {
		for _, a := range h.acqs {
			if k.name == name && a.parent == ctx {
				return true
			}
		}
	}
	return false
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
		delete(t.holds, key)
		t.watchdog.Remove(h.lease)
		h.stopWatch()
		return a, restore, h.lease, true
	}
	restore = h.ttl(t.opts.WatchdogTimeout)
	t.watchdog.Update(h.lease, h.renewed(), watchdog.Deadline(time.Now(), restore))
	return a, restore, h.lease, true
}

// goneCause returns why the hold behind held context ctx left the table
// without a release, if ctx is a held context of key's hold and it did;
// else nil.
func (t *holdTable) goneCause(ctx context.Context, key holdKey) error {
	h, ok := ctx.Value(holdCtxKey{}).(*hold)
	if !ok || h.key != key {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return h.gone
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
	if t.holds[h.key] == h {
		delete(t.holds, h.key)
	}
	h.gone = cause
	t.mu.Unlock()
	h.stopWatch()
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

// lose cancels, with cause, every held context of the holds that match,
// and forgets those holds.
func (t *holdTable) lose(match func(holdKey) bool, cause error) {
	t.mu.Lock()
	var lost []*hold
	for k, h := range t.holds {
		if match(k) {
			lost = append(lost, h)
			delete(t.holds, k)
			h.gone = cause
			t.watchdog.Remove(h.lease)
			h.stopWatch()
		}
	}
	t.mu.Unlock()
	for _, h := range lost {
		h.cancelAll(cause)
	}
}

// renewGroup is a watchdog batch group: the holds that one renewal script
// call renews share the script and the hash slot. Grouping by slot on
// every client, not only on a cluster client, keeps relock working behind
// a cluster proxy, which looks like one node but refuses a script whose
// keys span slots; names that share a hash tag still fill a batch.
type renewGroup struct {
	renewer renewer
	slot    uint16
}

// renewGroupOf returns the group of a hold on name that r renews.
func renewGroupOf(name string, r renewer) renewGroup {
	return renewGroup{renewer: r, slot: scripts.Slot(name)}
}

// id is the group as the watchdog knows it (watchdog.Lease.Group).
func (g renewGroup) id() uint32 { return uint32(g.renewer)<<16 | uint32(g.slot) }

// groupOfID is the group whose id is id.
func groupOfID(id uint32) renewGroup {
	return renewGroup{renewer: renewer(id >> 16), slot: uint16(id)}
}

// renew is the watchdog's renew function: one renewal script call per batch,
// all in one pipeline per script that has batches due.
func (t *holdTable) renew(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
	start := time.Now()
	byScript := make([][]int, len(renewers)) // batch indexes by renewer
	held := make([][]scripts.Held, len(batches))
	for i, b := range batches {
		held[i] = make([]scripts.Held, len(b))
		r := groupOfID(b[0].Group).renewer
		for j, l := range b {
			held[i][j] = heldFor(l.Key, l.Owner, r)
		}
		if r == renewPermit {
			t.tokens(held[i])
		}
		byScript[r] = append(byScript[r], i)
	}
	renewed := make([][]bool, len(batches))
	errs := make([]error, len(batches))
	for r, idx := range byScript {
		if len(idx) == 0 {
			continue
		}
		sub := make([][]scripts.Held, len(idx))
		for k, i := range idx {
			sub[k] = held[i]
		}
		ok, e := t.renewAll(ctx, renewer(r), ttl, sub)
		for k, i := range idx {
			renewed[i], errs[i] = ok[k], e[k]
			if renewer(r) == renewPermit && e[k] == nil {
				t.renewedPermits(batches[i], held[i], start)
			}
		}
	}
	if hook := t.opts.Hooks.Renewed; hook != nil {
		r := renewal(time.Since(start), batches, renewed, errs)
		_ = t.guard.Run("Hooks.Renewed", func() { hook(r) })
	}
	return renewed, errs
}

// renewAll renews batches with r's script. The watchdog's batches never
// mix hash slots: behind a cluster proxy, which looks like one node, a
// script whose keys span slots is refused with CROSSSLOT. But on one node
// most locks are alone in their slot, and 10,000 of them made as many
// script calls a round. So where it may (spanSlots), renewAll joins the
// RLock layout's batches into calls of up to RenewBatchSize locks, and on
// a CROSSSLOT stops doing so for good and sends the batches as they are.
func (t *holdTable) renewAll(ctx context.Context, r renewer, ttl time.Duration, batches [][]scripts.Held) ([][]bool, []error) {
	if r != renewLock || len(batches) < 2 || !t.spanSlots.Load() {
		return renewers[r](ctx, t.conn(), ttl, batches)
	}
	joined, from := joinBatches(batches, max(t.opts.RenewBatchSize, 1))
	ok, errs := renewers[r](ctx, t.conn(), ttl, joined)
	for _, err := range errs {
		if scripts.IsReply(err) && strings.Contains(err.Error(), "CROSSSLOT") {
			t.spanSlots.Store(false)
			t.opts.Logger.Debug("relock: renewals keep to one hash slot per script from now on", "error", err)
			return renewers[r](ctx, t.conn(), ttl, batches)
		}
	}
	renewed, batchErrs := make([][]bool, len(batches)), make([]error, len(batches))
	for j := range joined {
		at := 0
		for _, i := range from[j] {
			n := len(batches[i])
			if errs[j] == nil {
				renewed[i] = ok[j][at : at+n]
			}
			batchErrs[i] = errs[j]
			at += n
		}
	}
	return renewed, batchErrs
}

// joinBatches joins whole batches, in order, into batches of at most size
// (each at most size already); from[j] lists the batches joined into
// joined[j].
func joinBatches(batches [][]scripts.Held, size int) (joined [][]scripts.Held, from [][]int) {
	for i, b := range batches {
		j := len(joined) - 1
		if j < 0 || len(joined[j])+len(b) > size {
			joined, from = append(joined, nil), append(from, nil)
			j++
		}
		joined[j] = append(joined[j], b...)
		from[j] = append(from[j], i)
	}
	return joined, from
}

// tokens fills in the lease end relock last wrote for each permit of a
// batch (see scripts.PermitRenew).
func (t *holdTable) tokens(batch []scripts.Held) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for j := range batch {
		if h := t.holds[holdKey{name: batch[j].Key, owner: batch[j].Owner}]; h != nil {
			batch[j].Token = h.token
		}
	}
}

// renewedPermits records what a renewal of a batch of permits found: each
// renewed permit's new lease end, and, for a permit whose lease another
// client set since (Redisson's updateLeaseTime), that lease: such a hold
// is no longer renewed, and ends with that lease, as after UpdateLease,
// or, since nothing watches it any more, a renewal's deadline after this
// round, whichever is first (the watchdog keeps the earlier deadline of a
// lease that stopped being renewed during a round).
func (t *holdTable) renewedPermits(leases []*watchdog.Lease, batch []scripts.Held, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for j, p := range batch {
		h := t.holds[holdKey{name: p.Key, owner: p.Owner}]
		if h == nil || h.lease != leases[j] {
			continue
		}
		if p.Left == 0 {
			h.token = p.Token
			continue
		}
		h.leased(p.Left, sent)
	}
}

// renewal sums up a renewal round for the Renewed hook.
func renewal(took time.Duration, batches [][]*watchdog.Lease, renewed [][]bool, errs []error) Renewal {
	r := Renewal{Duration: took}
	for i, b := range batches {
		r.Holds += len(b)
		if errs[i] != nil {
			r.Failed += len(b)
			if r.Err == nil {
				r.Err = errs[i]
			}
			continue
		}
		for _, ok := range renewed[i] {
			if !ok {
				r.Failed++
			}
		}
	}
	return r
}

// setLease gives the hold at key, if this client has it, a lease of d from
// sent: the watchdog no longer renews it, and ends it then.
func (t *holdTable) setLease(key holdKey, d time.Duration, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.holds[key]; h != nil {
		h.leased(d, sent)
	}
}

// leased gives h a lease of d from sent: the watchdog no longer renews it,
// and ends it then. The caller holds t.mu.
func (h *hold) leased(d time.Duration, sent time.Time) {
	for i := range h.acqs {
		h.acqs[i].lease = d
	}
	h.t.watchdog.Update(h.lease, false, watchdog.Deadline(sent, d))
}

// heldFor is the renewal's view of the hold whose lease names key and
// owner (holdKey.leaseOwner), which r renews.
func heldFor(key, owner string, r renewer) scripts.Held {
	if r != renewGroupLock {
		return scripts.Held{Key: key, Owner: owner}
	}
	owner, values, _ := strings.Cut(owner, " ")
	return scripts.Held{Key: key, Owner: owner, Fields: valueSet(values).fields()}
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
	if t.holds[h.key] != h {
		t.mu.Unlock()
		return // released or lost meanwhile
	}
	delete(t.holds, h.key)
	t.watchdog.Remove(h.lease)
	h.gone = cause
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
