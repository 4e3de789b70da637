package reentrant

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// Waiters that started together, before their client listened on the
// lock, leave it to one of them to look again once subscribed (see
// waiting.recheck); the others wait for a wake with no attempt of their
// own to come. They still count among the client's waits that take
// handoffs: each takes the lock from a release, as its client's offer,
// with no attempt after its first. Counted only from an attempt that
// offered, they left the client with no offer once the one that looked
// had taken the lock and gone, and each of the rest then needed a wake
// and an attempt of its own (a crowd on four clients lost two handoffs in
// five so).
func TestWaitersThatStartedTogetherTakeHandoffs(t *testing.T) {
	s := redistest.Start(t)
	holder, waiters := gapClients(t, s)
	const name, n = "together", 8

	held, err := holder.Lock(name).Lock(context.Background(), LeaseFor(time.Minute))
	require.NoError(t, err)
	// Every waiter's first attempt is sent before any of them subscribes.
	var attempts atomic.Int32
	allSent := make(chan struct{})
	waiters.hookBeforeSend = func() {
		if attempts.Add(1) == n {
			close(allSent)
		}
	}
	waiters.hookBeforeSubscribe = func() { <-allSent }

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := waiters.Lock(name).Lock(ctx)
			if err == nil {
				err = waiters.Lock(name).Unlock(got)
			}
			errs <- err
		}()
	}
	// Queued: every first attempt sent, and the client's offer written by
	// the attempt of the waiter that looked again.
	redistest.Eventually(t, 10*time.Second, "the client's offer", func() bool {
		rec, err := s.Do("HGET", "relock_grants:{"+name+"}", waiters.ID()).ToString()
		return err == nil && attempts.Load() > n && !strings.HasSuffix(rec, ":0")
	})
	redistest.Eventually(t, 10*time.Second, "every wait counted among the offer's", func() bool {
		return waiters.names.Waiters(name) == n
	})
	before := attempts.Load()
	require.NoError(t, holder.Lock(name).Unlock(held))
	waitAll(t, &wg)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, before, attempts.Load(), "attempts after the release: each waiter took the lock from a release")
}
