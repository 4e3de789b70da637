package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// Hooks are told when this process's leadership of an election begins and
// ends: once Elected per Campaign, then once Lost or Resigned. Any may be
// nil. They must not block: Elected and Resigned run on the campaigning
// and resigning goroutines, Lost on one of its own. A hook that panics is
// recovered and logged with its stack. relockotel's NewElectionHooks makes
// them report to OpenTelemetry.
type Hooks struct {
	// Elected: this process leads name, in term.
	Elected func(name string, term Term)
	// Lost: leadership ended without Resign: lost (cause wraps
	// reentrant.ErrLockLost), stalled (reentrant.ErrStalled, with
	// Options.ProgressWithin), or the client closed (reentrant.ErrClosed).
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
	rt       addon.Runtime
	key      string // the election's lock key
	owner    string
	term     Term
	held     context.Context // the lock's held context
	outer    *leadership
	resigned atomic.Bool
	once     sync.Once
	cand     *candidacy // its standing, left when leadership ends
	// stepDown ends the leading context when a request to resign comes;
	// requested is the successor it named.
	stepDown  context.CancelCauseFunc
	requested atomic.Pointer[string]
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
		_ = l.rt.Guard.Run("election Hooks.Elected", func() { h(l.name, l.term) })
	}
	context.AfterFunc(l.held, func() {
		cause := context.Cause(l.held)
		lost := errors.Is(cause, reentrant.ErrLockLost) || errors.Is(cause, reentrant.ErrStalled)
		if lost && !l.resigned.Load() {
			l.rt.Go(l.announceEnd)
		}
		if !l.resigned.Load() {
			l.rt.Go(l.cand.leave)
		}
		if lost || errors.Is(cause, reentrant.ErrClosed) {
			l.ended(cause)
		}
	})
	leading, stepDown := context.WithCancelCause(l.held)
	l.stepDown = stepDown
	return context.WithValue(leading, leadershipKey{}, l)
}

// announceWindow bounds how long announcing a leadership's end may take.
const announceWindow = 5 * time.Second

// announceEnd takes a leadership that ended without Resign (it stalled, or
// was lost) off the record and announces it, as Resign does, so that
// observers see nobody lead at once, not when the hold's TTL would have
// run out; its candidate leaves the roll in the same step. The record
// changes only if it still names this leadership: a successor's record
// stays.
func (l *leadership) announceEnd() {
	ctx, cancel := context.WithTimeout(l.rt.Closing, announceWindow)
	defer cancel()
	if _, err := scripts.ElectionResign(ctx, l.rt.Conn(), l.key, l.owner, l.reg(), int64(l.term), l.rt.Publish); err != nil {
		l.rt.Logger.Debug("relock: announcing the end of a leadership failed; observers see it when its hold's TTL runs out", "election", l.name, "term", l.term, "error", err)
	}
}

// reg is the registration of the leadership's candidacy, "" for none.
func (l *leadership) reg() string {
	if l.cand == nil {
		return ""
	}
	return l.cand.regID
}

// ended tells the hooks leadership ended: lost with cause, or resigned
// (cause nil).
func (l *leadership) ended(cause error) {
	l.once.Do(func() {
		switch h := l.hooks; {
		case cause != nil && h.Lost != nil:
			_ = l.rt.Guard.Run("election Hooks.Lost", func() { h.Lost(l.name, l.term, cause) })
		case cause == nil && h.Resigned != nil:
			_ = l.rt.Guard.Run("election Hooks.Resigned", func() { h.Resigned(l.name, l.term) })
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

// ErrResignRequested is the cause of a leading context ended by
// RequestResign: the leader was asked to step down. It should finish what
// it is doing and Resign, which then hands over as asked (Run does so).
var ErrResignRequested = errors.New("asked to resign")

// heed follows the election's record while l leads, and ends leading
// with ErrResignRequested when a request to resign names l's term.
func (l *leadership) heed(leading context.Context, fail func(string, error) error) {
	f := &follower{rt: l.rt, channel: scripts.ElectionChannel(l.key), fail: fail, blind: func(error) {}, wake: leaderNews}
	f.look = func(ctx context.Context) (time.Duration, error) {
		r, err := scripts.ElectionRead(ctx, l.rt.Conn(), l.key)
		if err != nil {
			return 0, err
		}
		if r.Owner == l.owner && Term(r.Term) == l.term && r.Request != "" {
			to := r.Request
			l.requested.Store(&to)
			l.stepDown(fmt.Errorf("relock: election %q: term %d: %w", l.name, l.term, ErrResignRequested))
		}
		return 0, nil
	}
	f.run(leading)
}
