package reentrant

import "context"

type tokenKey struct{}

// TokenFrom returns the fencing token of the newest fenced acquisition that
// ctx descends from: Redisson's lockAndGetToken and getToken.
func TokenFrom(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(tokenKey{}).(int64)
	return t, ok
}
