package reentrant

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// The lock is released between a waiter's failed attempt and its
// subscription, so the release's message reaches nobody. The waiter still
// acquires at once, from the attempt it makes after subscribing, not after
// the holder's TTL or the re-poll interval (both a minute here).
func TestReleaseInTheGap(t *testing.T) {
	s := redistest.Start(t)
	holder, err := New(s.Client(), Options{})
	require.NoError(t, err)
	defer holder.Close()
	waiter, err := New(s.Client(), Options{RepollInterval: time.Minute})
	require.NoError(t, err)
	defer waiter.Close()

	held, err := holder.Lock("gap").Lock(context.Background(), LeaseFor(time.Minute))
	require.NoError(t, err)
	released := make(chan time.Time, 1)
	waiter.hookBeforeSubscribe = func() {
		require.NoError(t, holder.Lock("gap").Unlock(held))
		released <- time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := waiter.Lock("gap").Lock(ctx)
	require.NoError(t, err, "the waiter was left waiting")
	t.Logf("acquired %v after the release in the gap", time.Since(<-released))
	require.NoError(t, waiter.Lock("gap").Unlock(got))
}
