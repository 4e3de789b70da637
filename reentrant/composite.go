package reentrant

import (
	"context"
	"fmt"
)

// checkParts returns the first reason a lock made of parts (a MultiLock, a
// Redlock) cannot be used with ctx: none at all, or a part that cannot.
func checkParts(ctx context.Context, what string, parts []*Lock) error {
	if len(parts) == 0 {
		return fmt.Errorf("%w: a %s needs at least one lock", ErrInvalidArgument, what)
	}
	for _, l := range parts {
		if err := l.check(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}
