package reentrant

import (
	"context"
	"time"
)

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

// newOwnerCtx is what WithoutOwner returns: its Context's values, except
// relock's own, with base's cancellation and deadline.
type newOwnerCtx struct {
	context.Context
	base context.Context
}

func (c newOwnerCtx) Deadline() (time.Time, bool) { return c.base.Deadline() }

func (c newOwnerCtx) Done() <-chan struct{} { return c.base.Done() }

func (c newOwnerCtx) Err() error { return c.base.Err() }

func (c newOwnerCtx) Value(key any) any {
	switch key.(type) {
	case ownerKey, givenKey, holdCtxKey, tokenKey, multiKey, redlockKey:
		return nil
	}
	return c.Context.Value(key)
}
