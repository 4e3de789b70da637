package reentrant

import (
	"context"
	"fmt"

	"github.com/relock-go/relock/scripts"
)

// lockRef is what the machinery knows of a Lock: its client, its key and
// its kind, whose row is resolved when the handle is made
// (Client.newLock). Lock's methods (lock.go) hand it to the acquire cycle,
// the release and the inspections; a nil Lock's is nil, which check turns
// into ErrInvalidArgument.
type lockRef struct {
	c      *Client
	name   string // the key: given, mapped by Options.NameMapper
	given  string
	kind   lockKind
	row    *kind    // kinds[kind]
	spin   Backoff  // a spin lock's waits (SpinLock)
	fields []string // a group lock's value fields, sorted (GroupLock)
	values valueSet // the same, as a hold's key has them
	// bad, when set, is why the handle was made with input it cannot use
	// (a GroupLock with no values): every call fails with it.
	bad error
}

// kindOf is the lock's kind; a nil lockRef's is KindLock (the call fails
// its check all the same).
func (l *lockRef) kindOf() Kind {
	if l == nil {
		return KindLock
	}
	return l.row.kind
}

// directed reports whether the lock's waiters take directed wakes (see
// scripts.Wake): a plain or fenced lock, not a spin lock, on a client whose
// scripts can count who hears a channel (see Client.New).
func (l *lockRef) directed() bool {
	return l.c.directed && l.row.directed
}

// publish is the command the lock's releases announce themselves with:
// none for a spin lock's, whose waiters do not listen.
func (l *lockRef) publish() scripts.Publish {
	if l.row.spins {
		return scripts.PublishNone
	}
	return l.c.publish
}

// check returns the first reason the handle cannot be used with ctx.
func (l *lockRef) check(ctx context.Context, err error) error {
	switch {
	case l == nil:
		return fmt.Errorf("relock: %w: nil lock", ErrInvalidArgument)
	case !l.c.usable():
		return fmt.Errorf("relock: %w: lock %q comes from a nil Client or one not made by New", ErrInvalidArgument, l.name)
	case ctx == nil:
		return fmt.Errorf("relock: %w: nil context", ErrInvalidArgument)
	case l.name == "":
		return fmt.Errorf("relock: %w: empty lock name", ErrInvalidArgument)
	case l.bad != nil:
		return l.bad
	case zeroOwner(ctx):
		return fmt.Errorf("relock: %w: lock %q: the context carries the zero Owner (use one from NewOwner or ParseOwner)", ErrInvalidArgument, l.name)
	case l.c.cluster && !scripts.SlotSafe(l.name):
		return fmt.Errorf("relock: %w: lock name %q has a \"{\" but no non-empty hash tag, so its channel would fall in another cluster slot", ErrInvalidArgument, l.name)
	case err != nil:
		return err
	}
	return l.c.checkOpen()
}

// key names owner's hold of the lock in the client's hold table.
func (l *lockRef) key(owner Owner) holdKey {
	return holdKey{name: l.name, owner: l.field(owner), values: l.values}
}

// field is the hash field that records owner's holds.
func (l *lockRef) field(owner Owner) string {
	if l.row.field == nil {
		return owner.id
	}
	return l.row.field(owner.id)
}

func (l *lockRef) channel(owner Owner) string { return l.row.channel(l.name, owner.id) }
