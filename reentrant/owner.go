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
	return &ownerCtx{ctx, o}
}

// ownerCtx is WithOwner's context: context.WithValue's, but in one
// allocation where WithValue takes two (the owner boxed, then the
// context), since every Lock without an owner of its own makes one. Its
// value under ownerKey is itself, which an interface holds without
// boxing.
type ownerCtx struct {
	context.Context
	o Owner
}

func (c *ownerCtx) Value(key any) any {
	if _, ok := key.(ownerKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// ownerOf returns the owner ctx was given by WithOwner, if it was.
func ownerOf(ctx context.Context) (Owner, bool) {
	oc, ok := ctx.Value(ownerKey{}).(*ownerCtx)
	if !ok {
		return Owner{}, false
	}
	return oc.o, true
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

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (Owner, bool) {
	o, ok := ownerOf(ctx)
	return o, ok && !o.IsZero()
}

// zeroOwner reports whether ctx was given the zero Owner by WithOwner.
func zeroOwner(ctx context.Context) bool {
	o, ok := ownerOf(ctx)
	return ok && o.IsZero()
}

// holderField reads a lock hash's field: the owner that holds the lock,
// and whether as a read-write lock's writer ("<owner>:write"); ok is
// false for a field that names no owner.
func holderField(f string) (owner string, write, ok bool) {
	owner, write = strings.CutSuffix(f, ":write")
	_, err := ParseOwner(owner)
	return owner, write, err == nil
}
