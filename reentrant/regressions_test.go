package reentrant_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// Bugs that other lock libraries shipped, each pinned here by a test of
// relock's own (docs/safety.md lists them with the tests elsewhere that
// pin the others).

// Redisson #6483: a renewal task that failed on one lock's entry (a
// NullPointerException in LockTask.renew) left every lock of the task
// unrenewed, expiring under holders never told. Here one hold's key,
// turned into a string, fails its own renewal only: that hold is told it
// is lost, and the other, renewed in the same batch, is kept for ten
// minutes of fake time.
func TestOneBadRenewalSparesTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c, _ := fakeTimeClient(t, reentrant.Options{})
		bad, err := c.Lock("{batch}:bad").Lock(bg())
		require.NoError(t, err)
		good, err := c.Lock("{batch}:good").Lock(bg())
		require.NoError(t, err)
		m.Del("{batch}:bad")
		require.NoError(t, m.Set("{batch}:bad", "not a lock"))
		<-bad.Done()
		assert.ErrorIs(t, context.Cause(bad), reentrant.ErrLockLost)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.NoError(t, context.Cause(good), "the other hold of the batch is kept")
		assert.Greater(t, m.TTL("{batch}:good"), 19*time.Second, "renewed within the last period")
		require.NoError(t, c.Lock("{batch}:good").Unlock(good))
	})
}

// Redisson #3712: a lock deleted on the server under its holder, then
// taken again by the same application, was no longer renewed (the old
// renewal entry stood in for the new hold's), and expired under it. Here
// the new hold, of the same name on the same Client, is kept for ten
// minutes of fake time.
func TestRetakenLockIsRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, c, _ := fakeTimeClient(t, reentrant.Options{})
		owner := c.NewOwner()
		held, err := c.Lock("retaken").Lock(reentrant.WithOwner(bg(), owner))
		require.NoError(t, err)
		m.Del("retaken")
		<-held.Done()
		again, err := c.Lock("retaken").Lock(reentrant.WithOwner(bg(), owner))
		require.NoError(t, err)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.NoError(t, context.Cause(again), "the hold taken again is kept")
		assert.Greater(t, m.TTL("retaken"), 19*time.Second, "renewed within the last period")
		require.NoError(t, c.Lock("retaken").Unlock(again))
	})
}

// Redisson #2515 and #3194: after a renewal failed for a connection error
// (Redis restarted), renewals stopped for the locks taken afterwards too,
// which then expired under their holders. Here Redis dies under a hold
// (which is told it is lost) and comes back empty; a hold taken after, on
// the same Client, is renewed on, its TTL raised again three times.
func TestRenewalsGoOnAfterAnOutage(t *testing.T) {
	e := onRedis(t)
	const ttl = 900 * time.Millisecond
	c := e.client(t, reentrant.Options{WatchdogTimeout: ttl})
	held, err := c.Lock("outage").Lock(bg())
	require.NoError(t, err)
	e.server.Kill()
	<-held.Done()
	assert.ErrorIs(t, context.Cause(held), reentrant.ErrLockLost)
	e.server.Restart()
	_ = e.do(t, "PING") // the admin connection died with the server: this one finds it so

	var after context.Context
	eventually(t, "a hold after the outage", func() bool {
		after, err = c.Lock("outage").Lock(bg())
		return err == nil
	})
	last, raised := e.int(t, "PTTL", "outage"), 0
	eventually(t, "three renewals", func() bool {
		ttl := e.int(t, "PTTL", "outage")
		if ttl > last+50 {
			raised++
		}
		last = ttl
		return raised == 3
	})
	require.NoError(t, context.Cause(after), "the hold taken after the outage is kept")
	require.NoError(t, c.Lock("outage").Unlock(after))
}
