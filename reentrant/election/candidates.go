package election

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/relock-go/relock/scripts"
)

// Candidate is one live candidate of an election: a Campaign that waits
// or leads.
type Candidate struct {
	Owner string    // its owner, as text: what To and RequestResign name
	Value string    // the value it campaigns with
	Since time.Time // when it began to stand, on Redis's clock
	Leads bool      // whether it leads now
	// TTL is what its registration has left: a candidate whose process
	// died leaves the list when it runs out (at most
	// Options.WatchdogTimeout of its Client).
	TTL time.Duration
}

// ErrNotCandidate: the owner named as a successor does not stand in the
// election (it never did, its Campaign ended, or its process died), or is
// the leader itself.
var ErrNotCandidate = errors.New("not a candidate")

// Candidates returns the election's live candidates, the one standing
// longest first. It reads Redis once and writes nothing.
//
// A Campaign stands from its start until it fails, or, once it leads,
// until its leadership ends. It stands in a registration of its own, a
// plain lock its Client's watchdog keeps as it keeps every hold: so a
// candidate whose process died, or that lost Redis, leaves the list when
// that registration's TTL runs out, within Options.WatchdogTimeout, with
// no candidate polling anything.
func (e *Election) Candidates(ctx context.Context) ([]Candidate, error) {
	if err := e.check(ctx); err != nil {
		return nil, err
	}
	return e.candidates(ctx)
}

func (e *Election) candidates(ctx context.Context) ([]Candidate, error) {
	leader, cs, err := scripts.ElectionCandidates(ctx, e.rt.Conn(), e.lock.Key())
	if err != nil {
		return nil, e.fail("candidates", err)
	}
	out := make([]Candidate, len(cs))
	for i, c := range cs {
		out[i] = Candidate{Owner: c.Owner, Value: c.Value, Since: c.Since, Leads: c.Owner == leader, TTL: c.TTL}
	}
	return out, nil
}

// ObservedCandidates is one sight of an election's candidates, or, with
// Err set, that the observer cannot see them now (Candidates is then the
// last list seen).
type ObservedCandidates struct {
	Candidates []Candidate
	Err        error
}

// ObserveCandidates returns a channel that receives the live candidates
// at once, then at every change (a candidate that stands or leaves, a
// change of leader), and is closed when ctx ends. It follows the
// election's channel as Observe does, with the same promises: no polling,
// an Observed with Err when it cannot see, and, for a candidate that died
// and announced nothing, a read when its registration's TTL runs out, so
// it is dropped within a millisecond of that. The channel holds the latest
// list, replaced while unread.
func (e *Election) ObserveCandidates(ctx context.Context) <-chan ObservedCandidates {
	out := make(chan ObservedCandidates, 1)
	if err := e.check(ctx); err != nil {
		out <- ObservedCandidates{Err: err}
		close(out)
		return out
	}
	w := &candidateWatch{out: out}
	f := e.follower(func(ctx context.Context) (time.Duration, error) {
		cs, err := e.candidates(ctx)
		if err != nil {
			return 0, err
		}
		w.see(cs)
		return nextExpiry(cs), nil
	}, w.cannotSee, nil)
	if !e.rt.Go(func() {
		defer close(out)
		if f.run(ctx) {
			w.send(ObservedCandidates{Candidates: w.last.Candidates, Err: e.closed()})
		}
	}) {
		out <- ObservedCandidates{Err: e.closed()}
		close(out)
	}
	return out
}

// nextExpiry is when the first registration of cs runs out, plus a
// millisecond; 0 for none.
func nextExpiry(cs []Candidate) time.Duration {
	var next time.Duration
	for _, c := range cs {
		if c.TTL >= 0 && (next == 0 || c.TTL+time.Millisecond < next) {
			next = c.TTL + time.Millisecond
		}
	}
	return next
}

// candidateWatch serves one ObserveCandidates' channel.
type candidateWatch struct {
	out  chan ObservedCandidates
	last ObservedCandidates
	sent bool
}

// see sends cs if it differs from the last sent (TTLs aside).
func (w *candidateWatch) see(cs []Candidate) {
	same := func(a, b Candidate) bool { a.TTL, b.TTL = 0, 0; return a == b }
	if w.sent && w.last.Err == nil && slices.EqualFunc(cs, w.last.Candidates, same) {
		return
	}
	w.send(ObservedCandidates{Candidates: cs})
}

func (w *candidateWatch) cannotSee(err error) {
	if w.sent && w.last.Err != nil {
		return
	}
	w.send(ObservedCandidates{Candidates: w.last.Candidates, Err: err})
}

// send gives the reader v (see latest) and remembers it as the last sent.
func (w *candidateWatch) send(v ObservedCandidates) {
	latest(w.out, v)
	w.last, w.sent = v, true
}
