package waitstate

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestAWrittenOfferIsGivenBackByTheLastToLeave(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("a")
	tb.Join("a")
	o, old := tb.Next("a", time.Minute, &owners, true)
	if o.N == 0 || o.Last != o.N+1 || old != (Offer{}) {
		t.Fatalf("Next = %v, %v; want a new offer of two numbers (two waits) and nothing to give back", o, old)
	}
	tb.Done("a", o, true)
	if got := tb.Leave("a"); got != (Offer{}) {
		t.Fatalf("the first of two waits to leave gave back %v", got)
	}
	if got := tb.Leave("a"); got != o {
		t.Fatalf("the last wait to leave gave back %v, want the written offer %v", got, o)
	}
	if len(tb.m) != 0 {
		t.Fatalf("entries left after every wait left: %v", tb.m)
	}
}

// Each number of an offer is taken once, in turn; a number taken past
// others takes them with it (releases give them in order); the last one
// taken uses the offer up, and the next write makes a new one.
func TestAnOffersNumbersAreTakenOnceInTurn(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	for range OfferSize + 1 {
		tb.Join("a")
	}
	o, _ := tb.Next("a", time.Minute, &owners, true)
	if o.Last != o.N+OfferSize-1 {
		t.Fatalf("Next = %v with %d waits; want %d numbers", o, OfferSize+1, OfferSize)
	}
	for _, n := range []int64{o.N, o.N + 1, o.N + 3} {
		if _, _, ok := tb.Take("a", n); !ok {
			t.Fatalf("number %d of %v could not be taken", n, o)
		}
	}
	for _, n := range []int64{o.N, o.N + 2, o.N + 3, o.Last + 1} {
		if _, _, ok := tb.Take("a", n); ok {
			t.Fatalf("number %d of %v was taken after %d", n, o, o.N+3)
		}
	}
	if next, _ := tb.Next("a", time.Minute, &owners, true); next != (Offer{o.N + 4, o.Last}) {
		t.Fatalf("the offer after three were taken: %v, want the rest of %v", next, o)
	}
	if _, _, ok := tb.Take("a", o.Last); !ok {
		t.Fatal("the last number could not be taken")
	}
	if next, _ := tb.Next("a", time.Minute, &owners, true); next.N <= o.Last {
		t.Fatalf("the offer after the last number was taken: %v, want a new one after %v", next, o)
	}
}

// A release writes an offer only when no write of it ran: the releases
// that give its numbers move it on in Redis.
func TestAReleaseWritesAnOfferOnce(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("a")
	o, _ := tb.Next("a", time.Minute, &owners, false)
	if o.N == 0 {
		t.Fatal("no offer to write")
	}
	if again, _ := tb.Next("a", time.Minute, &owners, false); again != o {
		t.Fatalf("a release before the first write was answered: %v, want %v again", again, o)
	}
	tb.Done("a", o, true)
	tb.Done("a", o, true)
	if again, _ := tb.Next("a", time.Minute, &owners, false); again != (Offer{}) {
		t.Fatalf("a release after the offer was written: %v, want none", again)
	}
	if again, _ := tb.Next("a", time.Minute, &owners, true); again != o {
		t.Fatalf("an attempt after the offer was written: %v, want %v", again, o)
	}
	tb.Withdrawn("a", o)
	if again, _ := tb.Next("a", time.Minute, &owners, false); again.N <= o.Last {
		t.Fatalf("a release after the offer was withdrawn: %v, want a new one", again)
	}
}

func TestOffersLeftAtCloseAreDrained(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("a")
	o, _ := tb.Next("a", time.Minute, &owners, true)
	closed := tb.Close()
	if got := tb.Leave("a"); got != (Offer{}) {
		t.Fatalf("Leave gave back %v after Close began; Drain should", got)
	}
	tb.Ended()
	select {
	case <-closed:
	default:
		t.Fatal("Close's channel stayed open after the last wait ended")
	}
	if got := tb.Drain(); len(got) != 1 || got[0] != (GivenBack{"a", o}) {
		t.Fatalf("Drain = %v, want the offer %v of a", got, o)
	}
}

func TestQueuedMarksAreBoundedAndSpareOffers(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("offered")
	tb.Waited("offered", true)
	for i := range MaxQueued {
		tb.Waited(fmt.Sprint(i), true)
	}
	if tb.Queued("offered") || tb.Queued("0") {
		t.Fatal("marks kept past MaxQueued")
	}
	if !tb.Queued(fmt.Sprint(MaxQueued - 1)) {
		t.Fatal("the newest mark was forgotten")
	}
	if len(tb.m) != 2 {
		t.Fatalf("%d entries, want the newest mark's and the offered lock's", len(tb.m))
	}
	if o, _ := tb.Next("offered", time.Minute, &owners, true); o.N == 0 {
		t.Fatal("forgetting marks dropped a waited-on lock's entry")
	}
	tb.Waited(fmt.Sprint(MaxQueued-1), false)
	if tb.queued != 0 || len(tb.m) != 1 {
		t.Fatalf("queued %d, %d entries after the last mark was cleared", tb.queued, len(tb.m))
	}
}

func TestDropsSinceAMark(t *testing.T) {
	var d Drops
	m := d.Mark()
	if d.Since(m) {
		t.Fatal("a drop seen where none was sent")
	}
	done := d.Sending()
	if !d.Since(m) || !d.Since(d.Mark()) {
		t.Fatal("a drop in flight was not seen")
	}
	done()
	if d.Since(d.Mark()) {
		t.Fatal("an answered drop sent before the mark was seen")
	}
}

// An offer is used for a third of its lease, then replaced, the old one
// given back: a hold handed from an older one would be believed for less
// than two thirds of its lease, between two renewals (fake time).
func TestAnOfferIsReplacedAThirdOfItsLeaseOld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tb Table
		var owners atomic.Int64
		const lease = 30 * time.Second
		tb.Join("a")
		o, _ := tb.Next("a", lease, &owners, true)
		tb.Done("a", o, true)
		time.Sleep(lease/3 - time.Millisecond)
		if again, old := tb.Next("a", lease, &owners, true); again != o || old != (Offer{}) {
			t.Fatalf("just under a third of its lease old: %v (giving back %v), want %v kept", again, old, o)
		}
		tb.Done("a", o, true)
		time.Sleep(2 * time.Millisecond)
		again, old := tb.Next("a", lease, &owners, true)
		if again.N <= o.Last || old != o {
			t.Fatalf("past a third of its lease: %v (giving back %v), want a new offer and %v given back", again, old, o)
		}
		if sent, l, ok := tb.Take("a", again.N); !ok || l != lease || time.Since(sent) != 0 {
			t.Fatalf("the new offer's number: sent %v ago, lease %v, taken %v; want its full lease from now", time.Since(sent), l, ok)
		}
	})
}
