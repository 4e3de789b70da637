package election

import (
	"context"
	"errors"
	"sync"

	"github.com/relock-go/relock/reentrant"
)

// Hooks are told when this process's leadership of an election begins and
// ends: once Elected per Campaign, then once Lost or Resigned. Any may be
// nil. They must not block: Elected and Resigned run on the campaigning
// and resigning goroutines, Lost on one of its own. relockotel's
// NewElectionHooks makes them report to OpenTelemetry.
type Hooks struct {
	// Elected: this process leads name, in term.
	Elected func(name string, term Term)
	// Lost: leadership ended without Resign: lost (cause wraps
	// reentrant.ErrLockLost), or the client closed (reentrant.ErrClosed).
	Lost func(name string, term Term, cause error)
	// Resigned: Resign gave leadership up.
	Resigned func(name string, term Term)
}

// Option sets how New makes an Election.
type Option func(*Election)

// WithHooks gives the Election hooks.
func WithHooks(h Hooks) Option { return func(e *Election) { e.hooks = h } }

// term is one leadership's end, told once to the hooks.
type term struct {
	once sync.Once
	e    *Election
	n    Term
}

type termKey struct{}

// began tells the hooks leadership began, arranges for a loss to be told,
// and returns leading, carrying what ended needs.
func (e *Election) began(leading context.Context, n Term) context.Context {
	if e.hooks.Elected == nil && e.hooks.Lost == nil && e.hooks.Resigned == nil {
		return leading
	}
	t := &term{e: e, n: n}
	if h := e.hooks.Elected; h != nil {
		h(e.Name(), n)
	}
	context.AfterFunc(leading, func() {
		if cause := context.Cause(leading); errors.Is(cause, reentrant.ErrLockLost) || errors.Is(cause, reentrant.ErrClosed) {
			t.ended(cause)
		}
	})
	return context.WithValue(leading, termKey{}, t)
}

// ended tells the hooks leadership ended: lost with cause, or resigned
// (cause nil).
func (t *term) ended(cause error) {
	t.once.Do(func() {
		switch h := t.e.hooks; {
		case cause != nil && h.Lost != nil:
			h.Lost(t.e.Name(), t.n, cause)
		case cause == nil && h.Resigned != nil:
			h.Resigned(t.e.Name(), t.n)
		}
	})
}

// resigned tells the hooks leading ended by Resign, whose Unlock returned
// err: a loss found then is told as a loss.
func resigned(leading context.Context, err error) {
	t, ok := leading.Value(termKey{}).(*term)
	if !ok {
		return
	}
	if errors.Is(err, reentrant.ErrLockLost) {
		t.ended(err)
		return
	}
	t.ended(nil)
}
