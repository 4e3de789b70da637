package election

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

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

// leadership is one Campaign's leadership, carried by its leading
// context: who leads, in which term, on which held lock; the leaderships
// of other elections it was campaigned under (outer); and its end, told
// once to the hooks.
type leadership struct {
	name     string // the election's
	hooks    Hooks
	key      string // the election's lock key
	owner    string
	term     Term
	held     context.Context // the lock's held context
	outer    *leadership
	resigned atomic.Bool
	once     sync.Once
}

type leadershipKey struct{}

// leadershipOf returns the leadership of the election whose lock is key
// that ctx carries (any election's, for key ""), or nil: one not
// resigned, and, when live is set, not lost.
func leadershipOf(ctx context.Context, key string, live bool) *leadership {
	l, _ := ctx.Value(leadershipKey{}).(*leadership)
	for ; l != nil; l = l.outer {
		if (key == "" || l.key == key) && !l.resigned.Load() && (!live || l.held.Err() == nil) {
			return l
		}
	}
	return nil
}

// begin tells the hooks leadership began, arranges for a loss to be told,
// and returns the leading context.
func (l *leadership) begin() context.Context {
	if h := l.hooks.Elected; h != nil {
		h(l.name, l.term)
	}
	context.AfterFunc(l.held, func() {
		if cause := context.Cause(l.held); errors.Is(cause, reentrant.ErrLockLost) || errors.Is(cause, reentrant.ErrClosed) ||
			errors.Is(cause, reentrant.ErrStalled) {
			l.ended(cause)
		}
	})
	return context.WithValue(l.held, leadershipKey{}, l)
}

// ended tells the hooks leadership ended: lost with cause, or resigned
// (cause nil).
func (l *leadership) ended(cause error) {
	l.once.Do(func() {
		switch h := l.hooks; {
		case cause != nil && h.Lost != nil:
			h.Lost(l.name, l.term, cause)
		case cause == nil && h.Resigned != nil:
			h.Resigned(l.name, l.term)
		}
	})
}

// resign tells the hooks leadership ended by Resign, whose Unlock returned
// err: a loss found then is told as a loss.
func (l *leadership) resign(err error) {
	if errors.Is(err, reentrant.ErrLockLost) || errors.Is(err, reentrant.ErrStalled) {
		l.ended(err)
		return
	}
	l.ended(nil)
}
