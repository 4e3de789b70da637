package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/reentrant"
)

// Nil and zero values (a handle from a nil or zero Client, a nil handle, a
// zero LockOption, a nil func, a nil context) get ErrInvalidArgument, never a
// panic.
func TestNilAndZeroValues(t *testing.T) {
	e := onMiniredis(t)
	c := e.client(t)
	var nilClient *reentrant.Client
	zero := &reentrant.Client{}
	var nilLock *reentrant.Lock
	var nilRW *reentrant.ReadWriteLock
	var nilMulti *reentrant.MultiLock
	var nilRedlock *reentrant.Redlock
	var nilCtx context.Context
	invalid := func(t *testing.T, err error) {
		t.Helper()
		assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	}
	cases := map[string]func(t *testing.T){
		"nil client": func(t *testing.T) {
			_, err := nilClient.Lock("x").Lock(bg())
			invalid(t, err)
			_, err = nilClient.FencedLock("x").Lock(bg())
			invalid(t, err)
			_, err = nilClient.NonReentrantLock("x").Lock(bg())
			invalid(t, err)
			_, err = nilClient.NonReentrantFairLock("x").Lock(bg())
			invalid(t, err)
			_, err = nilClient.FairLock("x").Lock(bg())
			invalid(t, err)
			_, err = nilClient.ReadWriteLock("x").WriteLock().Lock(bg())
			invalid(t, err)
			_, err = nilClient.SpinLock("x", reentrant.Backoff{}).Lock(bg())
			invalid(t, err)
			invalid(t, nilClient.Do(bg(), "x", func(context.Context) error { return nil }))
			invalid(t, nilClient.Close())
			assert.True(t, nilClient.NewOwner().IsZero())
			assert.Empty(t, nilClient.ID())
		},
		"zero client": func(t *testing.T) {
			_, err := zero.Lock("x").Lock(bg())
			invalid(t, err)
			invalid(t, zero.Lock("x").Unlock(bg()))
			invalid(t, zero.Close())
			assert.True(t, zero.NewOwner().IsZero())
		},
		"nil handles": func(t *testing.T) {
			_, err := nilLock.Lock(bg())
			invalid(t, err)
			_, _, err = nilLock.TryLock(bg())
			invalid(t, err)
			invalid(t, nilLock.Unlock(bg()))
			_, err = nilLock.IsLocked(bg())
			invalid(t, err)
			_, err = nilLock.HoldCount(bg())
			invalid(t, err)
			_, err = nilLock.RemainTTL(bg())
			invalid(t, err)
			_, err = nilLock.ForceUnlock(bg())
			invalid(t, err)
			invalid(t, nilLock.Do(bg(), func(context.Context) error { return nil }))
			assert.Empty(t, nilLock.Name())
			_, err = nilRW.ReadLock().Lock(bg())
			invalid(t, err)
			_, err = nilMulti.Lock(bg())
			invalid(t, err)
			invalid(t, nilMulti.Unlock(bg()))
			_, err = nilRedlock.Lock(bg())
			invalid(t, err)
			invalid(t, nilRedlock.Unlock(bg()))
		},
		"nil locks in a multi-lock or Redlock": func(t *testing.T) {
			_, err := reentrant.NewMultiLock(nil).Lock(bg())
			invalid(t, err)
			_, err = reentrant.NewMultiLock(c.Lock("a"), nil).Lock(bg())
			invalid(t, err)
			_, err = reentrant.NewRedlock(nil, c.Lock("a")).Lock(bg())
			invalid(t, err)
		},
		"zero option": func(t *testing.T) {
			var o reentrant.LockOption // the zero value, as an unset option
			_, err := c.Lock("x").Lock(bg(), o)
			invalid(t, err)
			_, _, err = c.Lock("x").TryLock(bg(), reentrant.WaitAtMost(time.Second), o)
			invalid(t, err)
			_, err = reentrant.NewMultiLock(c.Lock("x")).Lock(bg(), o)
			invalid(t, err)
		},
		"nil func": func(t *testing.T) {
			invalid(t, c.Lock("x").Do(bg(), nil))
			invalid(t, c.Do(bg(), "x", nil))
			locked, err := c.Lock("x").IsLocked(bg())
			assert.NoError(t, err)
			assert.False(t, locked, "nothing was taken")
		},
		"nil context": func(t *testing.T) {
			_, err := c.Lock("x").Lock(nilCtx)
			invalid(t, err)
			_, _, err = c.Lock("x").TryLock(nilCtx)
			invalid(t, err)
			invalid(t, c.Lock("x").Unlock(nilCtx))
			_, err = c.Lock("x").HoldCount(nilCtx)
			invalid(t, err)
			_, err = c.Lock("x").IsLocked(nilCtx)
			invalid(t, err)
			_, err = c.Lock("x").ForceUnlock(nilCtx)
			invalid(t, err)
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			assert.NotPanics(t, func() { run(t) })
		})
	}
}
