package waitstate

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestAWrittenOfferIsGivenBackByTheLastToLeave(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("a")
	tb.Join("a")
	n, old := tb.Next("a", time.Minute, &owners)
	if n == 0 || old != 0 {
		t.Fatalf("Next = %d, %d; want a new number and nothing to give back", n, old)
	}
	tb.Done("a", n, true)
	if got := tb.Leave("a"); got != 0 {
		t.Fatalf("the first of two waits to leave gave back %d", got)
	}
	if got := tb.Leave("a"); got != n {
		t.Fatalf("the last wait to leave gave back %d, want the written offer %d", got, n)
	}
	if len(tb.m) != 0 {
		t.Fatalf("entries left after every wait left: %v", tb.m)
	}
}

func TestAnOfferIsTakenOnce(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("a")
	n, _ := tb.Next("a", time.Minute, &owners)
	if _, _, ok := tb.Take("a", n); !ok {
		t.Fatal("the offer could not be taken")
	}
	if _, _, ok := tb.Take("a", n); ok {
		t.Fatal("the offer was taken twice")
	}
	if got := tb.Leave("a"); got != 0 {
		t.Fatalf("a taken offer was given back: %d", got)
	}
}

func TestOffersLeftAtCloseAreDrained(t *testing.T) {
	var tb Table
	var owners atomic.Int64
	tb.Join("a")
	n, _ := tb.Next("a", time.Minute, &owners)
	closed := tb.Close()
	if got := tb.Leave("a"); got != 0 {
		t.Fatalf("Leave gave back %d after Close began; Drain should", got)
	}
	tb.Ended()
	select {
	case <-closed:
	default:
		t.Fatal("Close's channel stayed open after the last wait ended")
	}
	if got := tb.Drain(); len(got) != 1 || got[0] != (GivenBack{"a", n}) {
		t.Fatalf("Drain = %v, want the offer %d of a", got, n)
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
	if n, _ := tb.Next("offered", time.Minute, &owners); n == 0 {
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
