// Package retry is the one loop that sends a call to Redis again until it
// is answered, with the pause between tries as a value.
//
// Every such loop in relock (a release whose reply was lost, a
// synchronizer's change the server could not run, leaving a fair queue, an
// undo, INFO at start) has the same shape: try, decide whether that was
// the last try, pause, try again. What differs is the decision and the
// pause, so those are what a caller passes.
package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff is how long to pause between tries: First before the second
// try, each next pause twice the last, at most Max. With Jitter each pause
// is drawn from the upper half of its bound, so that callers backing off
// together drift apart. With PauseFirst it pauses before the first try
// too, for a caller whose trigger was a failure that may not have passed.
type Backoff struct {
	First, Max time.Duration
	Jitter     bool
	PauseFirst bool
}

// Outcome is what a try says of itself.
type Outcome int

const (
	// Again: not done, and the server was not heard (the call could not be
	// sent, or its reply was lost): pause, longer each time, and try again.
	Again Outcome = iota
	// Done: Until returns.
	Done
	// Refused: not done, but the server answered that it cannot do it for
	// now (it is loading its data, running a long script, failing over):
	// it is up, so the next pause is at most UpPause, and the pauses grow
	// from there only while the server is not heard again.
	Refused
)

// UpPause bounds the pause after a Refused try. Backing off doubles the
// pause while a server is down so as not to hammer it; a server that
// answers will soon serve, and a caller that paused a full Max after its
// answer would learn of it up to Max late (a second, after a restart's
// LOADING, for every waiter at once).
const UpPause = 100 * time.Millisecond

// Until calls try until it reports Done, pausing between calls as b says
// (and at most UpPause after a Refused try), and returns nil; n counts the
// tries from 0. pause sleeps for the time it is given, or returns an error
// when the tries must stop (the caller's ctx ended, the client is
// closing); Until then returns that error without trying again. A caller
// keeps what its last try returned in its own variables, so the loop
// needs no knowledge of what is being sent.
func Until(b Backoff, pause func(time.Duration) error, try func(n int) Outcome) error {
	var bound time.Duration
	out := Again
	for n := 0; ; n++ {
		if n > 0 || b.PauseFirst {
			bound = Doubled(bound, b.First, b.Max)
			if out == Refused {
				bound = min(bound, UpPause)
			}
			d := bound
			if b.Jitter {
				d = Jittered(bound)
			}
			if err := pause(d); err != nil {
				return err
			}
		}
		if out = try(n); out == Done {
			return nil
		}
	}
}

// ErrStopped is a pause's error when its stop channel closed (the client
// is closing).
var ErrStopped = errors.New("retry: stopped")

// Sleep returns the pause most callers of Until want: it sleeps, and ends
// early with ctx's error when ctx ends, or with ErrStopped when stop
// closes (a nil stop never does).
func Sleep(ctx context.Context, stop <-chan struct{}) func(time.Duration) error {
	return func(d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrStopped
		}
	}
}

// Doubled is every backoff's step: twice prev, at least lo, at most hi.
func Doubled(prev, lo, hi time.Duration) time.Duration {
	return min(max(2*prev, lo), hi)
}

// Jittered draws a wait from the upper half of bound.
func Jittered(bound time.Duration) time.Duration {
	return bound/2 + rand.N(bound/2+1)
}
