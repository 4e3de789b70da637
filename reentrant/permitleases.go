package reentrant

import (
	"time"

	"github.com/relock-go/relock/scripts"
	"github.com/relock-go/relock/watchdog"
)

// A permit's lease end, as the hold table keeps it for the permits'
// renewals (see renewals.permits), and a lease set on a hold.

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
