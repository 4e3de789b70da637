package reentrant

import (
	"context"
	"time"
)

// releaseWindow bounds how long Unlock keeps trying to release when the
// outcome of an attempt is unknown, and how long Redis remembers a release
// request (the unlock latch).
const releaseWindow = 10 * time.Second

// cleanup is the context for a call that gives something back: ctx's
// values without its cancellation (the caller's ctx is often done by then),
// bounded by the release window.
func cleanup(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
}
