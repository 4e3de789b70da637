package reentrant

import "context"

// FencedLock returns a handle on the fenced lock name, Redisson's
// RFencedLock: a reentrant lock whose every successful acquire, re-entry
// included, draws a fencing token from the counter
// redisson_lock_token:{name}; TokenFrom(held) returns it. Tokens only grow,
// across owners, clients and processes, so a store that remembers the
// largest token it has accepted and refuses smaller ones turns away a
// holder whose lock has expired meanwhile (a paused process, a lost lease).
// See docs/fencing.md.
func (c *Client) FencedLock(name string) *Lock {
	return c.newLock(name, fencedLock)
}

type tokenKey struct{}

// TokenFrom returns the fencing token of the newest fenced acquisition that
// ctx descends from: Redisson's lockAndGetToken and getToken.
func TokenFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}
