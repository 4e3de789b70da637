package reentrant

import (
	"context"
	"fmt"
	"slices"
)

// checkParts returns the first reason a lock made of parts (a MultiLock, a
// Redlock) cannot be used with ctx: none at all, or a part that cannot.
func checkParts(ctx context.Context, what string, parts []*Lock) error {
	if len(parts) == 0 {
		return fmt.Errorf("relock: %w: a %s needs at least one lock", ErrInvalidArgument, what)
	}
	for _, l := range parts {
		if err := l.ref().check(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// sameLocks reports whether a and b are handles on the same locks, in the
// same order: a composite lock may be released through any such handle,
// not only the one that took it.
func sameLocks(a, b []*Lock) bool {
	return slices.EqualFunc(a, b, func(x, y *Lock) bool {
		return x.r.c == y.r.c && x.r.name == y.r.name && x.r.kind == y.r.kind
	})
}
