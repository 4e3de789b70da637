package reentrant

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

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
// are o's, and o's holds can be re-entered and released with it. The zero
// Owner is refused by every call given such a ctx (ErrInvalidArgument).
func WithOwner(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, o)
}

// WithoutOwner returns a context for a new owner, as a new Java thread
// would be: a Lock with it waits its turn like anyone else's. Start a
// goroutine with it when the goroutine must not share the caller's holds: a
// goroutine given a held context is the same owner, and its Lock of a lock
// the caller holds succeeds at once (reentrancy).
//
// Given a held context (or one made from it), the result carries none of
// the hold either: it is not cancelled when the hold ends, so the goroutine
// can wait for the lock until the caller has released it. Its Done, Err
// and Deadline are those of the context the caller gave to its outermost
// Lock (a cause given to that context's cancel is not carried: context.Cause
// reports its Err). It keeps every value of ctx except relock's own (owner,
// fencing token, lease deadline). A nil ctx gives nil, which Lock refuses
// with ErrInvalidArgument.
func WithoutOwner(ctx context.Context) context.Context {
	if ctx == nil {
		return nil
	}
	base := caller(ctx)
	if base == ctx {
		return newOwnerCtx{Context: ctx, base: ctx}
	}
	// WithoutCancel keeps the values and hides the hold's cancellation
	// (and its cause); base's is taken directly, so nothing is registered
	// on base that would outlive the goroutine.
	return newOwnerCtx{Context: context.WithoutCancel(ctx), base: base}
}

// givenKey is the key under which a held context keeps the context given
// to the Lock that made it.
type givenKey struct{}

// caller returns the context given to the outermost Lock whose hold ctx
// carries, or ctx itself when it carries no hold.
func caller(ctx context.Context) context.Context {
	for {
		given, ok := ctx.Value(givenKey{}).(context.Context)
		if !ok {
			return ctx
		}
		ctx = given
	}
}

// newOwnerCtx is what WithoutOwner returns: its Context's values, except
// relock's own, with base's cancellation and deadline.
type newOwnerCtx struct {
	context.Context
	base context.Context
}

func (c newOwnerCtx) Deadline() (time.Time, bool) { return c.base.Deadline() }
func (c newOwnerCtx) Done() <-chan struct{}       { return c.base.Done() }
func (c newOwnerCtx) Err() error                  { return c.base.Err() }

func (c newOwnerCtx) Value(key any) any {
	switch key.(type) {
	case ownerKey, givenKey, holdCtxKey, tokenKey, multiKey, redlockKey:
		return nil
	}
	return c.Context.Value(key)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok && !o.IsZero()
}

// zeroOwner reports whether ctx was given the zero Owner by WithOwner.
func zeroOwner(ctx context.Context) bool {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return ok && o.IsZero()
}
