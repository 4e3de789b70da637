package reentrant

import (
	"context"
	"errors"
	"fmt"
)

// Do takes the lock, runs fn with the held context, and releases the lock,
// even when fn returns an error or panics (the panic goes on after the
// release). It returns fn's error joined with Unlock's. fn should watch its
// context: it is cancelled if the lock is lost.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...LockOption) (err error) {
	if fn == nil {
		return fmt.Errorf("relock: %w: Do with a nil func", ErrInvalidArgument)
	}
	held, err := l.Lock(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := l.Unlock(held); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(held)
}

// Do is c.Lock(name).Do(ctx, fn, opts...).
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...LockOption) error {
	return c.Lock(name).Do(ctx, fn, opts...)
}
