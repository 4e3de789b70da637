package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// result is a call's result in these tests: how it was made.
type result struct {
	call  int
	alone bool  // by one, on the caller's goroutine
	batch []int // by Many, with these calls
	err   error
	sent  bool
}

// harness is Lines[string, int, result] whose one and Many block until
// released, and record what they were given.
type harness struct {
	l       *Lines[string, int, result]
	manyIn  chan []int    // each Many's calls
	release chan struct{} // lets one blocked one or Many return
	done    chan struct{} // closed by close: every blocked one and Many returns
	closing context.CancelFunc
	tasks   sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	ended   sync.Once
}

// within bounds every wait of these tests: a call that never comes, or
// never returns, fails the test at once rather than hang it.
const within = 10 * time.Second

func newHarness(max int) *harness {
	h := &harness{manyIn: make(chan []int, 100), release: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.Background())
	h.closing = func() { cancel(errors.New("closed")) }
	h.l = &Lines[string, int, result]{
		Many: func(ctx context.Context, k string, calls []int) []result {
			h.manyIn <- calls
			h.blocked()
			rs := make([]result, len(calls))
			for i, c := range calls {
				rs[i] = result{call: c, batch: calls}
			}
			return rs
		},
		Cut:     func(err error, sent bool) result { return result{err: err, sent: sent} },
		Start:   h.start,
		Closing: ctx,
		Max:     max,
	}
	return h
}

func (h *harness) start(f func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.tasks.Add(1)
	go func() { defer h.tasks.Done(); f() }()
	return true
}

// close ends the harness: every one and Many still blocked returns (a
// test that failed midway leaves some), and the line's tasks end.
func (h *harness) close() {
	h.ended.Do(func() { close(h.done) })
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.closing()
	h.tasks.Wait()
}

// blocked waits until a test releases it, or the harness ends.
func (h *harness) blocked() {
	select {
	case <-h.release:
	case <-h.done:
	}
}

// let releases one blocked one or Many, failing the test if none is
// blocked within the bound.
func (h *harness) let(t *testing.T) {
	t.Helper()
	select {
	case h.release <- struct{}{}:
	case <-time.After(within):
		t.Fatal("nothing was blocked to release")
	}
}

// recv receives from ch, failing the test if nothing comes within the
// bound.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatal("nothing came")
		var zero T
		return zero
	}
}

// one is a lone call's function: it reports that it started, and returns
// once released.
func (h *harness) one(started chan<- struct{}) func(context.Context, int) result {
	return func(_ context.Context, c int) result {
		if started != nil {
			started <- struct{}{}
		}
		h.blocked()
		return result{call: c, alone: true}
	}
}

// now is a lone call's function that returns at once.
func now(_ context.Context, c int) result { return result{call: c, alone: true} }

// inFlight makes call 0 on line "a", alone, and returns once it is in
// flight (its one waits for a release), with the channel of its result.
func (h *harness) inFlight(t *testing.T) <-chan result {
	t.Helper()
	started := make(chan struct{}, 1)
	r := make(chan result, 1)
	go func() { r <- h.l.Do(context.Background(), "a", 0, h.one(started)) }()
	recv(t, started)
	return r
}

// enqueue makes call i on line "a" with ctx, and returns once it queued
// behind the call in flight, with the channel of its result.
func (h *harness) enqueue(t *testing.T, ctx context.Context, i int) <-chan result {
	t.Helper()
	before := h.l.Queued("a")
	r := make(chan result, 1)
	go func() { r <- h.l.Do(ctx, "a", i, h.one(nil)) }()
	for deadline := time.Now().Add(within); h.l.Queued("a") != before+1; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("call %d did not queue", i)
		}
	}
	return r
}

func TestALoneCallGoesAtOnceOnItsCallersGoroutine(t *testing.T) {
	h := newHarness(8)
	defer h.close()
	r := h.l.Do(context.Background(), "a", 1, now)
	if !r.alone || r.call != 1 {
		t.Fatalf("got %+v, want call 1 made alone", r)
	}
	select {
	case calls := <-h.manyIn:
		t.Fatalf("Many was called with %v", calls)
	default:
	}
}

func TestCallsBehindOneInFlightGoAsOne(t *testing.T) {
	h := newHarness(8)
	defer h.close()
	results := []<-chan result{h.inFlight(t)}
	for i := 1; i <= 3; i++ { // in this order
		results = append(results, h.enqueue(t, context.Background(), i))
	}
	// Another line is not held up by line a.
	if r := h.l.Do(context.Background(), "b", 9, now); !r.alone {
		t.Fatalf("line b's call: %+v, want it made alone", r)
	}
	h.let(t) // call 0 returns; 1-3 go together
	if calls := recv(t, h.manyIn); fmt.Sprint(calls) != "[1 2 3]" {
		t.Fatalf("Many got %v, want [1 2 3]", calls)
	}
	h.let(t)
	if r := recv(t, results[0]); !r.alone {
		t.Errorf("call 0: %+v, want it made alone", r)
	}
	for i := 1; i <= 3; i++ {
		if r := recv(t, results[i]); r.call != i || fmt.Sprint(r.batch) != "[1 2 3]" {
			t.Errorf("call %d: %+v, want it made with [1 2 3]", i, r)
		}
	}
	// The line is free again: the next call goes alone.
	if r := h.l.Do(context.Background(), "a", 4, now); !r.alone {
		t.Fatalf("a call after the queue drained: %+v, want it made alone", r)
	}
}

func TestAtMostMaxGoAsOne(t *testing.T) {
	h := newHarness(2)
	defer h.close()
	results := []<-chan result{h.inFlight(t)}
	for i := 1; i <= 3; i++ {
		results = append(results, h.enqueue(t, context.Background(), i))
	}
	h.let(t)
	if calls := recv(t, h.manyIn); fmt.Sprint(calls) != "[1 2]" {
		t.Fatalf("first Many got %v, want [1 2]", calls)
	}
	h.let(t)
	if calls := recv(t, h.manyIn); fmt.Sprint(calls) != "[3]" {
		t.Fatalf("second Many got %v, want [3]", calls)
	}
	h.let(t)
	for _, r := range results {
		recv(t, r)
	}
}

func TestACallCutWhileQueuedIsNeverSent(t *testing.T) {
	h := newHarness(8)
	defer h.close()
	first := h.inFlight(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("caller gone")
	cut := h.enqueue(t, ctx, 1)
	last := h.enqueue(t, context.Background(), 2)
	cancel(cause)
	if r := recv(t, cut); r.call != 0 || !errors.Is(r.err, cause) || r.sent {
		t.Fatalf("the cut call: %+v, want the cause, not sent", r)
	}
	h.let(t)
	if calls := recv(t, h.manyIn); fmt.Sprint(calls) != "[2]" {
		t.Fatalf("Many got %v, want [2]: the cut call never goes", calls)
	}
	h.let(t)
	recv(t, first)
	recv(t, last)
}

func TestACallCutInFlightIsSaidSent(t *testing.T) {
	h := newHarness(8)
	defer h.close()
	first := h.inFlight(t)
	ctx, cancel := context.WithCancel(context.Background())
	cut := h.enqueue(t, ctx, 1)
	h.let(t)
	recv(t, h.manyIn) // call 1 is on its way
	cancel()
	if r := recv(t, cut); !r.sent || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a call cut in flight: %+v, want ctx's error, sent", r)
	}
	h.let(t) // Many returns to nobody: it must not block
	recv(t, first)
}

func TestCloseCutsWhatQueued(t *testing.T) {
	h := newHarness(8)
	first := h.inFlight(t)
	queued := h.enqueue(t, context.Background(), 1)
	h.mu.Lock()
	h.closed = true // Start refuses from now on, as after Close
	h.mu.Unlock()
	h.let(t)
	if r := recv(t, first); !r.alone || r.err != nil {
		t.Fatalf("the call in flight: %+v, want its own result", r)
	}
	if r := recv(t, queued); r.sent || !errors.Is(r.err, ErrClosing) {
		t.Fatalf("the queued call: %+v, want ErrClosing, not sent", r)
	}
	h.close()
}
