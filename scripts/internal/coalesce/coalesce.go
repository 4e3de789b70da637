// Package coalesce sends the calls that pile up behind one in flight as one
// call: group commit, for script calls that many goroutines of one client
// make at once.
//
// A call that finds nothing in flight on its line goes at once, on its
// caller's goroutine, as if there were no coalescing: a lone caller pays
// nothing and waits for nothing. Calls that come while one is in flight
// queue; when it ends, a goroutine of the line's own sends them as one
// call, then what queued meanwhile, until the line is empty. So there is
// no added delay, only a queue where there was a crowd, and while fewer
// than Max queue a call's wait is at most the round trip ahead of it and
// its own.
//
// Why: a busy client's connection otherwise writes each small script call
// with a write of its own (64 goroutines taking and giving back locks spent
// half the client's CPU in write(2)), and the server reads, parses and runs
// each as a call of its own.
package coalesce

import (
	"cmp"
	"context"
	"errors"
	"sync"
)

// ErrClosing cuts the calls queued when Start refused to run their sender
// before Closing ended.
var ErrClosing = errors.New("closing")

// Lines coalesces calls of type C, with results of type R, on lines named
// by K: only calls on the same line go together. The zero value is not
// usable; set every field but the unexported ones.
type Lines[K comparable, C, R any] struct {
	// Many makes one call of calls, on line k, and returns a result for
	// each, in order. It runs with Closing.
	Many func(ctx context.Context, k K, calls []C) []R
	// Cut is the result of a call its caller's ctx cut short, or that
	// Close stopped: sent says whether it went out (its outcome unknown),
	// or never did.
	Cut func(err error, sent bool) R
	// Start runs a goroutine that the owner's Close waits for, and reports
	// false once closing.
	Start func(func()) bool
	// Closing ends with the owner's Close: calls in flight are cut then.
	Closing context.Context
	// Max is the most calls sent as one.
	Max int

	mu    sync.Mutex
	lines map[K]*line[C, R]
	free  sync.Pool // *pending[C, R] whose caller took the result
}

// line is the calls of one K: whether one is in flight, and the queue
// behind it.
type line[C, R any] struct {
	busy  bool
	queue []*pending[C, R]
}

// pending is a call that queued. sent and gone are guarded by Lines.mu;
// res is written before done is signalled, once. done has room for that
// one signal, so a sender never blocks on a caller that left, and a
// pending whose caller took its result is used again (two allocations
// fewer per coalesced call).
type pending[C, R any] struct {
	call C
	done chan struct{}
	res  R
	sent bool // taken into a call: it is on its way
	gone bool // its caller left before it was taken: never send it
}

// Do makes call c on line k and returns its result. With nothing in flight
// on k, it runs one(ctx, c) itself; else it queues c and waits for the
// coalesced call to answer, or for ctx to end: a call still queued then is
// never sent, one taken into a call in flight is cut with sent set.
func (l *Lines[K, C, R]) Do(ctx context.Context, k K, c C, one func(context.Context, C) R) R {
	l.mu.Lock()
	if l.lines == nil {
		l.lines = make(map[K]*line[C, R])
	}
	ln := l.lines[k]
	if ln == nil {
		ln = &line[C, R]{}
		l.lines[k] = ln
	}
	if !ln.busy {
		ln.busy = true
		l.mu.Unlock()
		r := one(ctx, c)
		l.after(k, ln)
		return r
	}
	p, _ := l.free.Get().(*pending[C, R])
	if p == nil {
		p = &pending[C, R]{done: make(chan struct{}, 1)}
	}
	p.call = c
	ln.queue = append(ln.queue, p)
	l.mu.Unlock()
	select {
	case <-p.done:
		return l.result(p)
	case <-ctx.Done():
	}
	l.mu.Lock()
	sent := p.sent
	p.gone = !sent
	l.mu.Unlock()
	if sent {
		select {
		case <-p.done: // answered as ctx ended: the answer is the truth
			return l.result(p)
		default:
		}
	}
	return l.Cut(context.Cause(ctx), sent) // p is never used again
}

// result returns p's result and frees p for another call.
func (l *Lines[K, C, R]) result(p *pending[C, R]) R {
	r := p.res
	*p = pending[C, R]{done: p.done}
	l.free.Put(p)
	return r
}

// Queued returns how many calls wait on line k behind the one in flight.
func (l *Lines[K, C, R]) Queued(k K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	if ln := l.lines[k]; ln != nil {
		for _, p := range ln.queue {
			if !p.gone {
				n++
			}
		}
	}
	return n
}

// after ends the call in flight on ln: what queued behind it goes next, on
// a goroutine of its own, else the line is free.
func (l *Lines[K, C, R]) after(k K, ln *line[C, R]) {
	l.mu.Lock()
	if len(ln.queue) == 0 {
		ln.busy = false
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	if !l.Start(func() { l.drain(k, ln) }) {
		l.drop(ln, cmp.Or(context.Cause(l.Closing), ErrClosing))
	}
}

// drain sends ln's queue, Max calls at a time, until it is empty.
func (l *Lines[K, C, R]) drain(k K, ln *line[C, R]) {
	for {
		batch := l.take(ln)
		if batch == nil {
			return
		}
		calls := make([]C, len(batch))
		for i, p := range batch {
			calls[i] = p.call
		}
		for i, r := range l.Many(l.Closing, k, calls) {
			batch[i].res = r
			batch[i].done <- struct{}{}
		}
	}
}

// take takes up to Max calls off ln's queue whose callers still wait, and
// marks them sent; nil, with the line freed, when there are none.
func (l *Lines[K, C, R]) take(ln *line[C, R]) []*pending[C, R] {
	l.mu.Lock()
	defer l.mu.Unlock()
	var batch []*pending[C, R]
	n := 0
	for n < len(ln.queue) && len(batch) < l.Max {
		if p := ln.queue[n]; !p.gone {
			p.sent = true
			batch = append(batch, p)
		}
		n++
	}
	rest := copy(ln.queue, ln.queue[n:])
	clear(ln.queue[rest:])
	ln.queue = ln.queue[:rest]
	if batch == nil {
		ln.busy = false
	}
	return batch
}

// drop cuts every call queued on ln, unsent, with err, and frees the line.
func (l *Lines[K, C, R]) drop(ln *line[C, R], err error) {
	l.mu.Lock()
	var q []*pending[C, R]
	for _, p := range ln.queue {
		if !p.gone {
			p.sent = true // taken, so that its caller waits for its result
			q = append(q, p)
		}
	}
	ln.queue, ln.busy = nil, false
	l.mu.Unlock()
	for _, p := range q {
		p.res = l.Cut(err, false)
		p.done <- struct{}{}
	}
}
