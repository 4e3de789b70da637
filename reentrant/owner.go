package reentrant

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Owner identifies who holds a lock: "<client-id>:<n>", the hash field that
// Redisson writes as "<uuid>:<thread-id>". Everything done with contexts
// carrying the same Owner counts as one holder, so Lock re-enters instead of
// blocking.
//
// Lock gives a context without an owner a new one, so a chain of calls that
// passes its context on shares one owner, as a Java thread does. To hand a
// hold to another goroutine or process, pass the Owner (or its String form,
// read back with ParseOwner) and attach it there with WithOwner.
//
// The zero Owner is not valid.
type Owner struct {
	id string
}

// NewOwner returns a new owner, unique to this client; the zero Owner,
// which no lock accepts, for a nil Client or one not made by New.
func (c *Client) NewOwner() Owner {
	if !c.usable() {
		return Owner{}
	}
	return Owner{id: c.id + ":" + strconv.FormatInt(c.nextOwner.Add(1), 10)}
}

// ParseOwner reads back an Owner's String form. It accepts any
// "<uuid>:<int64>" with a lowercase UUID, including a Java Redisson owner.
func ParseOwner(s string) (Owner, error) {
	id, n, ok := strings.Cut(s, ":")
	if !ok || len(id) != 36 || strings.ToLower(id) != id || uuid.Validate(id) != nil {
		return Owner{}, fmt.Errorf("relock: %w: owner %q is not \"<uuid>:<int64>\"", ErrInvalidArgument, s)
	}
	if _, err := strconv.ParseInt(n, 10, 64); err != nil {
		return Owner{}, fmt.Errorf("relock: %w: owner %q is not \"<uuid>:<int64>\"", ErrInvalidArgument, s)
	}
	return Owner{id: s}, nil
}

// String returns the owner as stored in Redis, "<client-id>:<n>".
func (o Owner) String() string { return o.id }

// IsZero reports whether o is the zero Owner.
func (o Owner) IsZero() bool { return o.id == "" }

type ownerKey struct{}

// WithOwner returns a copy of ctx that acts as owner o: locks taken with it
// are o's, and o's holds can be re-entered and released with it.
func WithOwner(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, o)
}

// WithoutOwner returns a copy of ctx that carries no owner: a Lock with it
// acts for a new owner, as a Java thread would. Start a goroutine with it
// when the goroutine must not share the caller's holds: a goroutine given a
// held context is the same owner, and its Lock of a lock the caller holds
// succeeds at once (reentrancy), which Java users do not expect.
func WithoutOwner(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownerKey{}, Owner{})
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok && !o.IsZero()
}
