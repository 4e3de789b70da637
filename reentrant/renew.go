package reentrant

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/reentrant/internal/callback"
	"github.com/relock-go/relock/scripts"
	"github.com/relock-go/relock/watchdog"
)

// renewals renews a client's holds for its watchdog: one renewal script
// call per batch, the batches of one script in one pipeline. The hold
// table keeps the permits' lease ends, which a permit's renewal reads and
// writes back through permits.
type renewals struct {
	opts  *Options
	conn  func() scripts.Conn
	guard *callback.Guard // runs the Renewed hook
	// spanSlots: one renewal script may take locks of several hash slots
	// (see renewAll). Not on a cluster client, and not once the server
	// refused it (a cluster proxy).
	spanSlots atomic.Bool
	permits   permitLeases
	lastOK    time.Time // the send of the last round confirmed whole; the loop's only
}

// permitLeases is where a permit's renewal reads the lease end relock
// last wrote (tokens) and records what it found (renewedPermits): the
// hold table (permitleases.go).
type permitLeases interface {
	tokens(batch []scripts.Held)
	renewedPermits(leases []*watchdog.Lease, batch []scripts.Held, sent time.Time)
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

// groupOfID is the group whose id is id.
func groupOfID(id uint32) renewGroup {
	return renewGroup{renewer: renewer(id >> 16), slot: uint16(id)}
}

// renew is the watchdog's renew function: one renewal script call per batch,
// all in one pipeline per script that has batches due.
func (rn *renewals) renew(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
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
			rn.permits.tokens(held[i])
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
		ok, e := rn.renewAll(ctx, renewer(r), ttl, sub)
		for k, i := range idx {
			renewed[i], errs[i] = ok[k], e[k]
			if renewer(r) == renewPermit && e[k] == nil {
				rn.permits.renewedPermits(batches[i], held[i], start)
			}
		}
	}
	r := renewal(time.Since(start), batches, renewed, errs)
	r.TTL = ttl
	if r.Err == nil {
		if !rn.lastOK.IsZero() {
			r.Lag = max(time.Since(rn.lastOK.Add(ttl/3)), 0)
		}
		rn.lastOK = start
	}
	if hook := rn.opts.Hooks.Renewed; hook != nil {
		_ = rn.guard.Run("Hooks.Renewed", func() { hook(r) })
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
func (rn *renewals) renewAll(ctx context.Context, r renewer, ttl time.Duration, batches [][]scripts.Held) ([][]bool, []error) {
	if r != renewLock || len(batches) < 2 || !rn.spanSlots.Load() {
		return renewers[r](ctx, rn.conn(), ttl, batches)
	}
	joined, from := joinBatches(batches, max(rn.opts.RenewBatchSize, 1))
	ok, errs := renewers[r](ctx, rn.conn(), ttl, joined)
	for _, err := range errs {
		if scripts.IsReply(err) && strings.Contains(err.Error(), "CROSSSLOT") {
			rn.spanSlots.Store(false)
			rn.opts.Logger.Debug("relock: renewals keep to one hash slot per script from now on", "error", err)
			return renewers[r](ctx, rn.conn(), ttl, batches)
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

// heldFor is the renewal's view of the hold whose lease names key and
// owner (holdKey.leaseOwner), which r renews.
func heldFor(key, owner string, r renewer) scripts.Held {
	if r != renewGroupLock {
		return scripts.Held{Key: key, Owner: owner}
	}
	owner, values, _ := strings.Cut(owner, " ")
	return scripts.Held{Key: key, Owner: owner, Fields: valueSet(values).fields()}
}

// valueSet is a group lock's value fields as one comparable value: sorted,
// joined by spaces (fields are base64, which has none); empty for every
// other kind.
type valueSet string

func valuesOf(fields []string) valueSet { return valueSet(strings.Join(fields, " ")) }

func (v valueSet) fields() []string { return strings.Fields(string(v)) }
