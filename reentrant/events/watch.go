package events

import (
	"context"
	"fmt"
	"strings"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// Watch watches name on c and returns its events, in the order they
// happened, until ctx ends; then the channel is closed. It subscribes to
// the key's notifications on a connection of its own to the node that
// serves the key, and reads the holders after each change. Every change
// after Watch returns is told: it subscribes and then reads the holders
// it starts from, which it does not report. c's Close ends the watch: a
// last Missed event whose Err is reentrant.ErrClosed, then the channel is
// closed.
//
// Changes are read, not carried by the notifications, so a holder that
// came and went between two reads is not seen; a reader that does not keep
// up is told Missed rather than make the watch buffer without bound. An
// expiry is told when Redis expires the key, which may be a little after
// its TTL ran out (Redis expires keys on access or in a background cycle
// about every 100 ms).
//
// Its errors: reentrant.ErrInvalidArgument (a nil ctx or Client, an empty
// name), reentrant.ErrClosed, reentrant.ErrWrongType (the key holds
// neither a lock nor a count), ErrNotificationsOff,
// ErrNotificationsUnknown, reentrant.ErrNoPermission naming the right the
// Redis user lacks, or the connection's.
func Watch(ctx context.Context, c *reentrant.Client, name string, opts Options) (<-chan Event, error) {
	rt, ok := addon.Of(c)
	if ctx == nil || !ok || name == "" {
		return nil, fmt.Errorf("relock: %w: events.Watch needs a ctx, a Client made by reentrant.New and a name", reentrant.ErrInvalidArgument)
	}
	if rt.Closing.Err() != nil {
		return nil, fmt.Errorf("relock: watching %q: %w", name, reentrant.ErrClosed)
	}
	w := &watcher{rt: rt, key: rt.Key(name), opts: opts, out: make(chan Event, 1)}
	sub, err := w.subscribe(ctx)
	if err == nil {
		err = w.start(ctx, sub)
	}
	if err != nil {
		return nil, watchError(w.key, err)
	}
	if !rt.Go(func() { w.run(ctx, sub) }) {
		sub.close()
		return nil, fmt.Errorf("relock: watching %q: %w", name, reentrant.ErrClosed)
	}
	return w.out, nil
}

// rights are the ACL rules a watch needs beside a lock's, as
// docs/deployment.md gives them.
const rights = "+client|info +config|get &__keyspace@*__:*"

// watchError names the key in err, and tells a right the Redis user
// lacks by reentrant.ErrNoPermission.
func watchError(key string, err error) error {
	switch {
	case strings.HasPrefix(err.Error(), "relock: "):
		return err
	case scripts.IsNoPermission(err):
		return fmt.Errorf("relock: watching %q: %w: a watch needs %s beside a lock's rights (docs/deployment.md) (%w)", key, reentrant.ErrNoPermission, rights, err)
	}
	return fmt.Errorf("relock: watching %q: %w", key, err)
}
