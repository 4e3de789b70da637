package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// ErrStaleTerm: a fenced read or write was refused, because the resource
// has seen a larger term (or token): a newer leader has used it.
var ErrStaleTerm = errors.New("stale term")

// Fenced guards Redis string keys with terms (or a fenced lock's tokens,
// as Term): each key remembers the largest term that read or wrote it
// (in relock_fence:{key}), and refuses a read or write with a smaller one,
// atomically, in one script. A leader that was paused or cut off past its
// lease, and wakes to write, is refused with ErrStaleTerm; it never
// overwrites its successor's data. Reads raise the term seen as writes
// do: a value read by a stale leader and written back would otherwise
// land on the successor's (docs/fencing.md).
//
// Refused, changing nothing: a term below 1 (the zero Term is no term),
// an empty key or one of the fences' own (relock_fence:...), with
// reentrant.ErrInvalidArgument; a key holding anything but a string, or a
// fence holding anything but a term, with reentrant.ErrWrongType.
type Fenced struct {
	rt addon.Runtime
	ok bool
}

// NewFenced returns a Fenced whose scripts run on c, with c's replica
// sync. From a nil Client, every call fails with
// reentrant.ErrInvalidArgument.
func NewFenced(c *reentrant.Client) Fenced {
	rt, ok := addon.Of(c)
	return Fenced{rt: rt, ok: ok}
}

// Set writes value to key under term, or returns ErrStaleTerm.
func (f Fenced) Set(ctx context.Context, key string, term Term, value string) error {
	if err := f.check(ctx, key, term); err != nil {
		return err
	}
	_, _, ok, seen, err := scripts.Fenced(ctx, f.rt.Conn(), key, int64(term), true, value)
	return fenceResult(key, term, ok, seen, err)
}

// Get reads key under term: its value, whether it exists, or
// ErrStaleTerm.
func (f Fenced) Get(ctx context.Context, key string, term Term) (string, bool, error) {
	if err := f.check(ctx, key, term); err != nil {
		return "", false, err
	}
	v, found, ok, seen, err := scripts.Fenced(ctx, f.rt.Conn(), key, int64(term), false, "")
	return v, found, fenceResult(key, term, ok, seen, err)
}

// Seen returns the largest term (or token) that has read or written key
// through a Fenced, 0 for none: the term to outrank after a refusal that
// the caller's hold may prove wrong (fence.TokenPast).
func (f Fenced) Seen(ctx context.Context, key string) (Term, error) {
	if err := f.check(ctx, key, 1); err != nil {
		return 0, err
	}
	n, err := scripts.FenceSeen(ctx, f.rt.Conn(), key)
	if err != nil {
		return 0, fmt.Errorf("relock: fenced %q: %w", key, err)
	}
	return Term(n), nil
}

// check returns why f cannot read or write key under term with ctx.
func (f Fenced) check(ctx context.Context, key string, term Term) error {
	switch {
	case !f.ok || ctx == nil:
		return fmt.Errorf("relock: %w: a Fenced of a nil Client, or a nil context", reentrant.ErrInvalidArgument)
	case key == "":
		return fmt.Errorf("relock: fenced: %w: an empty key", reentrant.ErrInvalidArgument)
	case scripts.IsFenceKey(key):
		return fmt.Errorf("relock: fenced %q: %w: a fence's own key, not one to fence", key, reentrant.ErrInvalidArgument)
	case term < 1:
		return fmt.Errorf("relock: fenced %q: %w: term %d (terms and tokens start at 1)", key, reentrant.ErrInvalidArgument, term)
	case f.rt.Closing.Err() != nil:
		return fmt.Errorf("relock: fenced %q: %w", key, reentrant.ErrClosed)
	}
	return nil
}

func fenceResult(key string, term Term, ok bool, seen int64, err error) error {
	switch {
	case scripts.IsWrongType(err):
		return fmt.Errorf("relock: fenced %q: %w (%w)", key, reentrant.ErrWrongType, scripts.Tidy(err))
	case scripts.IsNoPermission(err):
		return fmt.Errorf("relock: fenced %q: %w (%w)", key, reentrant.ErrNoPermission, scripts.Tidy(err))
	case err != nil:
		return fmt.Errorf("relock: fenced %q: %w", key, err)
	case !ok:
		return fmt.Errorf("relock: fenced %q: %w: term %d, %d seen", key, ErrStaleTerm, term, seen)
	}
	return nil
}
