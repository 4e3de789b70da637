package reentrant

import (
	"context"
	"errors"
	"fmt"

	"github.com/relock-go/relock/scripts"
)

// Lock is a handle on one reentrant lock, Redisson's RLock: a Redis hash at
// key Name whose field is the holder's Owner and whose value is its hold
// count. Get one from Client.Lock. A Lock has no state of its own; all its
// methods are safe for concurrent use.
type Lock struct {
	c      *Client
	name   string // the key: given, mapped by Options.NameMapper
	given  string
	kind   lockKind
	spin   Backoff  // a spin lock's waits (SpinLock)
	fields []string // a group lock's value fields, sorted (GroupLock)
}

// Name returns the lock's name as given to the Client ("" for a nil Lock):
// its key, unless Options.NameMapper maps it.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.given
}

// Lock takes the lock, waiting while another owner holds it, and returns
// the held context. Do the work under the lock with it, and give it to
// Unlock: it carries the owner (ctx's, or a new one), and it is cancelled
// when the hold ends: by Unlock (cause context.Canceled), by Close
// (ErrClosed), or the moment the client learns the lock may be lost
// (ErrLockLost; see context.Cause). An owner that holds the lock already
// takes it again at once; each Lock needs its own Unlock. Without LeaseFor
// the watchdog keeps the lock for as long as it is held.
//
// Its errors: ctx's, wrapped, when ctx ends first; ErrNotAcquired when a
// wait option (NoWait, WaitAtMost, RetryCount) ran out while others held
// the lock; ErrDeadlock when the owner is the one a waits-for cycle gives
// up (docs/deadlocks.md); one that wraps the connection's error when Redis
// gave no answer, never ErrNotAcquired; ErrClosed after Close;
// ErrWrongType, ErrInvalidArgument and Redis's refusals at once. The rest
// says how, and why.
//
// An acquire whose reply comes after the new hold's local deadline (a stall
// of 0.9 TTL) is not trusted, since the lock may be gone by then: one
// renewal asks Redis whether the hold is still there. If it is, it is kept,
// with its deadline counted from the renewal; if not, the wait goes on as
// after an attempt that found the lock taken (a call that would not wait
// returns an error that is not ErrNotAcquired).
//
// If ctx ends first, Lock returns promptly with ctx's error wrapped. An
// attempt in flight then is heard out in the background, and whatever it
// did (a hold taken, a fair queue joined) is undone once its reply comes,
// not before: an undo sent at once could reach Redis ahead of the attempt,
// on another of the client's connections. The wait options (NoWait,
// WaitAtMost, RetryCount) make it give up with ErrNotAcquired instead.
//
// A waiting Lock rides out a failover or restart: a server that cannot run
// scripts for now (LOADING, READONLY, ...) is tried again after a backoff,
// and an attempt lost with its connection is undone (its hold, if it took
// one, released) before the wait goes on. Only an owner Lock made itself
// can be undone: with an owner from WithOwner, a lost attempt's error is
// returned, and a hold it may have taken expires after its TTL. Other
// errors from Redis (WRONGTYPE, a bad ACL) are returned at once. A wait
// that ends while Redis gives no answer returns an error that wraps the
// last connection error (and ctx's, if ctx ended it), never ErrNotAcquired:
// "held by someone else" and "could not reach Redis" are different answers.
func (l *Lock) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return l.acquire(ctx, newAcquireConfig(-1, l.kindOf(), opts))
}

// TryLock is Lock with NoWait unless the options say otherwise. It returns
// ok == false, with ctx and a nil error, when the lock was held by someone
// else for as long as the limits allowed; any other failure, an outage
// included, is an error.
func (l *Lock) TryLock(ctx context.Context, opts ...LockOption) (held context.Context, ok bool, err error) {
	held, err = l.acquire(ctx, newAcquireConfig(0, l.kindOf(), opts))
	if errors.Is(err, ErrNotAcquired) {
		return ctx, false, nil
	}
	if err != nil {
		return ctx, false, err
	}
	return held, true, nil
}

// kindOf is the lock's kind; a nil Lock's is KindLock (the call fails
// its check all the same).
func (l *Lock) kindOf() Kind {
	if l == nil {
		return KindLock
	}
	return l.kind.spec().kind
}

// directed reports whether the lock's waiters take directed wakes (see
// scripts.Wake): a plain or fenced lock, not a spin lock, on a client whose
// scripts can count who hears a channel (see Client.New).
func (l *Lock) directed() bool {
	return l.c.directed && l.kind.spec().directed
}

// publish is the command the lock's releases announce themselves with.
func (l *Lock) publish() scripts.Publish {
	if l.kind.spec().spins {
		return scripts.PublishNone
	}
	return l.c.publish
}

func (l *Lock) notAcquired() error {
	return fmt.Errorf("relock: lock %q: %w", l.name, ErrNotAcquired)
}

// check returns the first reason the handle cannot be used with ctx.
func (l *Lock) check(ctx context.Context, err error) error {
	switch {
	case l == nil:
		return fmt.Errorf("relock: %w: nil lock", ErrInvalidArgument)
	case !l.c.usable():
		return fmt.Errorf("relock: %w: lock %q comes from a nil Client or one not made by New", ErrInvalidArgument, l.name)
	case ctx == nil:
		return fmt.Errorf("relock: %w: nil context", ErrInvalidArgument)
	case l.name == "":
		return fmt.Errorf("relock: %w: empty lock name", ErrInvalidArgument)
	case l.kind == groupLock && len(l.fields) == 0:
		return fmt.Errorf("relock: %w: group lock %q has no values", ErrInvalidArgument, l.name)
	case zeroOwner(ctx):
		return fmt.Errorf("relock: %w: lock %q: the context carries the zero Owner (use one from NewOwner or ParseOwner)", ErrInvalidArgument, l.name)
	case l.c.cluster && !scripts.SlotSafe(l.name):
		return fmt.Errorf("relock: %w: lock name %q has a \"{\" but no non-empty hash tag, so its channel would fall in another cluster slot", ErrInvalidArgument, l.name)
	case err != nil:
		return err
	}
	return l.c.checkOpen()
}

// Lock returns a handle on the reentrant lock stored at key name. It is
// cheap and does nothing on Redis; handles with the same name are
// interchangeable.
func (c *Client) Lock(name string) *Lock {
	return c.newLock(name, plainLock)
}

// newLock returns a handle of kind k on the lock name.
func (c *Client) newLock(name string, k lockKind) *Lock {
	return &Lock{c: c, name: c.key(name), given: name, kind: k}
}

// field is owner's key in the client's hold table: the hash field that
// records its holds, and for a group lock its values too (see groupHold).
func (l *Lock) field(owner Owner) string {
	if l.kind == groupLock {
		return groupHold(owner.id, l.fields)
	}
	return l.kind.spec().field(owner.id)
}

func (l *Lock) channel(owner Owner) string { return l.kind.spec().channel(l.name, owner.id) }
