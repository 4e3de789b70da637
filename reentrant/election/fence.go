package election

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// ErrStaleTerm: a fenced read or write was refused, because the resource
// has seen a larger term (or token): a newer leader has used it.
var ErrStaleTerm = errors.New("relock: stale term")

// Fenced guards Redis string keys with terms (or a fenced lock's tokens,
// as Term): each key remembers the largest term that read or wrote it
// (in relock_fence:{key}), and refuses a read or write with a smaller one,
// atomically, in one script. A leader that was paused or cut off past its
// lease, and wakes to write, is refused with ErrStaleTerm; it never
// overwrites its successor's data. Reads raise the term seen as writes
// do: a value read by a stale leader and written back would otherwise
// land on the successor's (docs/fencing.md).
type Fenced struct {
	conn scripts.Conn
}

// NewFenced returns a Fenced on rdb.
func NewFenced(rdb rueidis.Client) Fenced { return Fenced{conn: scripts.Conn{Client: rdb}} }

// Set writes value to key under term, or returns ErrStaleTerm.
func (f Fenced) Set(ctx context.Context, key string, term Term, value string) error {
	if err := f.check(ctx); err != nil {
		return err
	}
	_, _, ok, seen, err := scripts.Fenced(ctx, f.conn, key, int64(term), true, value)
	return fenceResult(key, term, ok, seen, err)
}

// Get reads key under term: its value, whether it exists, or
// ErrStaleTerm.
func (f Fenced) Get(ctx context.Context, key string, term Term) (string, bool, error) {
	if err := f.check(ctx); err != nil {
		return "", false, err
	}
	v, found, ok, seen, err := scripts.Fenced(ctx, f.conn, key, int64(term), false, "")
	return v, found, fenceResult(key, term, ok, seen, err)
}

// check returns why f cannot be used with ctx: a Fenced not made by
// NewFenced with a client, or a nil ctx.
func (f Fenced) check(ctx context.Context) error {
	if f.conn.Client == nil || ctx == nil {
		return fmt.Errorf("relock: %w: a Fenced from a nil rueidis client, or a nil context", reentrant.ErrInvalidArgument)
	}
	return nil
}

func fenceResult(key string, term Term, ok bool, seen int64, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("relock: fenced %q: %w", key, err)
	case !ok:
		return fmt.Errorf("relock: fenced %q: %w: term %d, %d seen", key, ErrStaleTerm, term, seen)
	}
	return nil
}
