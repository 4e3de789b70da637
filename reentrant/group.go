package reentrant

import (
	"context"
	"slices"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// groupMessages reads Redisson's channel for a group lock's waiters. Java's
// releases say "0", for whatever values they freed, so that wakes them
// all; relock's say "00", and announce the values freed on their own
// channels (see groupWakes.blocked), so that passes.
func groupMessages(message string) int {
	if pubsub.LockWakes(message) != 0 {
		return pubsub.All
	}
	return 0
}

// groupWakes is the group lock's waker: its waits listen on the channel
// of the value that kept them out (see groupWakes.blocked).
type groupWakes struct{ quiet }

// begin sets up a group lock's wait: its channel is named when an attempt
// finds the values held (see groupWakes.blocked), unless the first value's channel
// is live: joined before the first attempt, it hears a release after that
// attempt, so a failed attempt blocked by that value needs no second one.
func (groupWakes) begin(c *cycle) {
	c.announcedOn("", pubsub.LockWakes, "")
	c.subscribe, c.alsoWakes, c.lingers = false, groupMessages, true
	if c.cfg.wait == 0 || c.l.c.sub.Idle() {
		return
	}
	ch := scripts.GroupValueChannel(c.l.name, c.l.fields[0])
	if w := c.l.c.sub.Join(ch); w != nil {
		c.channel, c.sub = ch, w
	}
}

// blocked makes the wait listen on the channel of value field
// r.Blocker, the one whose hold ends last among those that kept the
// attempt out: relock's releases announce there that it became free, to
// one waiter of each client (grouprelease.lua). A wait that listened for
// another value leaves that channel (any wake it had not acted on passes
// to the next local waiter there) and subscribes anew, with a look after,
// as after its first attempt. It listens on Redisson's channel too, for
// Java releases, which announce nothing else.
func (groupWakes) blocked(c *cycle, r lockAttempt) error {
	if r.err != nil || r.Blocker == "" {
		return nil
	}
	if ch := scripts.GroupValueChannel(c.l.name, r.Blocker); ch != c.channel {
		if c.sub != nil {
			c.sub.Leave()
			c.sub = nil
		}
		c.channel, c.subscribe = ch, true
	}
	c.listenAlso(scripts.LockChannel(c.l.name))
	return nil
}

// groupValues reads who holds each of a group lock's values.
func (l *lockRef) groupValues(ctx context.Context, op string) ([]scripts.GroupValue, error) {
	vals, err := scripts.GroupInspect(ctx, l.c.runner.Conn(), l.name, l.fields)
	if err != nil {
		return nil, redisError(op, l.name, err)
	}
	return vals, nil
}

// groupReader answers a group lock's inspections from its values (see
// reader).
type groupReader struct{}

// holdCount is how many times owner holds every one of the handle's
// values (the fewest of their counts).
func (groupReader) holdCount(ctx context.Context, l *lockRef, owner Owner) (int, error) {
	vals, err := l.groupValues(ctx, "hold count")
	if err != nil {
		return 0, err
	}
	n := int64(-1)
	for _, v := range vals {
		if v.Holder != owner.id {
			return 0, nil
		}
		if n < 0 || v.Count < n {
			n = v.Count
		}
	}
	return int(max(n, 0)), nil
}

// locked is whether anyone holds any of the handle's values (Redisson's
// isLocked).
func (groupReader) locked(ctx context.Context, l *lockRef) (bool, error) {
	vals, err := l.groupValues(ctx, "is locked")
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(vals, func(v scripts.GroupValue) bool { return v.Holder != "" }), nil
}

// remainTTL is how long until the last hold of the handle's values ends,
// 0 when none is held.
func (groupReader) remainTTL(ctx context.Context, l *lockRef) (time.Duration, error) {
	vals, err := l.groupValues(ctx, "remain ttl")
	if err != nil {
		return 0, err
	}
	var left time.Duration
	for _, v := range vals {
		left = max(left, v.Left)
	}
	return left, nil
}

// forceUnlock frees the handle's values whoever holds them, and ends this
// client's holds of any of them.
func (groupReader) forceUnlock(ctx context.Context, l *lockRef) (bool, error) {
	l.c.holds.lose(func(k holdKey) bool {
		if k.name != l.name {
			return false
		}
		return slices.ContainsFunc(k.values.fields(), func(f string) bool {
			_, found := slices.BinarySearch(l.fields, f)
			return found
		})
	}, ErrLockLost)
	freed, err := scripts.GroupForceUnlock(ctx, l.c.runner.Conn(), l.name, l.fields, l.c.publish)
	if err != nil {
		return false, redisError("force unlock", l.name, err)
	}
	return freed, nil
}
