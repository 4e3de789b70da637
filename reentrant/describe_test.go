package reentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// Inspect names each of Redisson's layouts and reads what is in it.
func TestInspect(t *testing.T) {
	e := onRedis(t)
	c := e.client(t)
	ctx := bg()
	kind := func(name string) reentrant.KeyInfo {
		t.Helper()
		info, err := c.Inspect(ctx, name)
		require.NoError(t, err)
		return info
	}

	held, err := c.Lock("plain").Lock(ctx)
	require.NoError(t, err)
	owner, _ := reentrant.OwnerFrom(held)
	_, err = c.Lock("plain").Lock(held)
	require.NoError(t, err)
	info := kind("plain")
	assert.Equal(t, reentrant.KindLock, info.Kind)
	assert.Equal(t, []reentrant.Holder{{Owner: owner.String(), Count: 2}}, info.Holders)
	assert.Greater(t, info.TTL, time.Duration(0))

	_, err = c.FencedLock("fenced").Lock(ctx)
	require.NoError(t, err)
	info = kind("fenced")
	assert.Equal(t, reentrant.KindFenced, info.Kind)
	assert.Greater(t, info.Token, int64(0))

	fairHeld, err := c.FairLock("fair").Lock(ctx)
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		_, err := c.FairLock("fair").Lock(ctx, reentrant.WaitAtMost(time.Minute))
		waiting <- err
	}()
	eventually(t, "a waiter queued", func() bool { return len(kind("fair").Queue) == 1 })
	info = kind("fair")
	assert.Equal(t, reentrant.KindFair, info.Kind)
	assert.True(t, info.Queue[0].Deadline.After(time.Now()))
	require.NoError(t, c.FairLock("fair").Unlock(fairHeld))
	require.NoError(t, recv(t, waiting))

	_, err = c.ReadWriteLock("rw").WriteLock().Lock(ctx)
	require.NoError(t, err)
	info = kind("rw")
	assert.Equal(t, reentrant.KindReadWrite, info.Kind)
	assert.Equal(t, "write", info.Mode)
	require.Len(t, info.Holders, 1)
	assert.True(t, info.Holders[0].Write)

	pes := c.PermitExpirableSemaphore("permits")
	_, err = pes.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	p, err := pes.Acquire(ctx, reentrant.LeaseFor(time.Minute))
	require.NoError(t, err)
	info = kind("permits")
	assert.Equal(t, reentrant.KindPermitSemaphore, info.Kind)
	assert.Equal(t, int64(1), info.Count)
	require.Len(t, info.Holders, 1)
	assert.Equal(t, p.ID(), info.Holders[0].Owner)
	assert.False(t, info.Holders[0].Deadline.IsZero())

	latch := c.CountDownLatch("latch")
	_, err = latch.TrySetCount(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, reentrant.KindSemaphoreOrLatch, kind("latch").Kind, "nobody listens: it cannot be told")
	awaiting := make(chan error, 1)
	awaitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { awaiting <- latch.Await(awaitCtx) }()
	eventually(t, "a waiter on the latch", func() bool { return kind("latch").Kind == reentrant.KindLatch })
	cancel()
	recv(t, awaiting)

	require.NoError(t, c.RateLimiter("rate").SetRate(ctx, reentrant.Rate{Permits: 5, Interval: time.Second}))
	info = kind("rate")
	assert.Equal(t, reentrant.KindRate, info.Kind)
	assert.Equal(t, reentrant.Rate{Permits: 5, Interval: time.Second}, info.Rate)

	e.do(t, "SET", "text", "hello")
	e.do(t, "HSET", "userdata", "field", "1")
	assert.Equal(t, reentrant.KindOther, kind("text").Kind)
	assert.Equal(t, reentrant.KindOther, kind("userdata").Kind)
	info = kind("missing")
	assert.Equal(t, reentrant.Kind(""), info.Kind)
	assert.Equal(t, "none", info.RedisType)

	_, err = c.Inspect(ctx, "")
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	var nilClient *reentrant.Client
	_, err = nilClient.Inspect(ctx, "x")
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
}
