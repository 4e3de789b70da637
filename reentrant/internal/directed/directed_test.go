package directed

import (
	"testing"

	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// TestADroppingReleaseCountsAsADrop: a release that takes its own client
// out of the lock's waiters' set (Offer.Drop) is a drop, as a winning
// attempt's SettleDrop is. A waiter of the client whose failed attempt
// registered it, and which was not on the wake channel yet, looks again
// only if it learns that a drop may have run after its attempt
// (waitstate.Drops.Since): an attempt marked before the release was
// answered must learn it, or it sleeps with its client out of the set and
// no release tells it. A release that drops nothing is not counted.
func TestADroppingReleaseCountsAsADrop(t *testing.T) {
	h := &Handoffs{Names: &waitstate.Table{}}

	before := h.Drops.Mark()
	answered := h.Released("lock", scripts.Offer{Client: "c", Drop: true})
	during := h.Drops.Mark()
	answered()
	if !h.Drops.Since(before) {
		t.Error("an attempt sent before a dropping release does not learn of the drop")
	}
	if !h.Drops.Since(during) {
		t.Error("an attempt sent while a dropping release was in flight does not learn of the drop")
	}

	after := h.Drops.Mark()
	h.Released("lock", scripts.Offer{Client: "c", N: 7, Last: 7})()
	if h.Drops.Since(after) {
		t.Error("a release that drops nothing is counted as a drop")
	}
}
