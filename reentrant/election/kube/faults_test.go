package kube_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// cuttable dials Redis unless cut: cut closes its connections and refuses
// new ones until healed, as a partition between one candidate and Redis.
type cuttable struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cuttable) dial(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("partitioned")
	}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cuttable) set(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for _, conn := range c.conns {
			_ = conn.Close()
		}
		c.conns = nil
	}
}

// tenure is one leadership, as its callbacks saw it.
type tenure struct {
	who         int
	term        election.Term
	start, stop time.Time
}

// TestResourceLockUnderFaults: three of client-go's electors on
// ResourceLocks, the leader cut off from Redis again and again. Each
// leader writes, while it leads, to a store in another Redis, fenced by
// its term; a write held back over the next leader's (a leader paused
// mid-write) is sent late. Oracles: one leader at a time (cut off, a
// leader stops at its renew deadline, before the lease the others count
// has run out), terms growing from leader to leader, and the late write
// refused as stale while every write the store took came in term order.
func TestResourceLockUnderFaults(t *testing.T) {
	s, store := redistest.Start(t), redistest.Start(t)
	const (
		lease, renew, retry = 4 * time.Second, 2 * time.Second, 200 * time.Millisecond
		n, rounds           = 3, 3
	)
	var (
		mu       sync.Mutex
		tenures  []tenure
		accepted []election.Term // the store's writes, in the order it took them
		late     = make(chan error, rounds)
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fenced := election.NewFenced(newClient(t, store))
	links := make([]*cuttable, n)
	var wg sync.WaitGroup
	for i := range n {
		links[i] = &cuttable{}
		rdb := s.Client(func(o *rueidis.ClientOption) { o.DialCtxFn = links[i].dial })
		c, err := reentrant.New(rdb, reentrant.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(); rdb.Close() })
		lock := kube.NewResourceLock(c, "faults", resourcelock.ResourceLockConfig{Identity: strconv.Itoa(i)})
		wg.Go(func() {
			for ctx.Err() == nil { // campaign again after each loss
				led := false
				leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
					Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, Name: "faults",
					Callbacks: leaderelection.LeaderCallbacks{
						OnStartedLeading: func(leading context.Context) {
							mu.Lock()
							term := lock.Term()
							tenures = append(tenures, tenure{who: i, term: term, start: time.Now()})
							led = true
							mu.Unlock()
							for seq := 0; leading.Err() == nil; seq++ {
								if err := fenced.Set(ctx, "store", term, fmt.Sprint(i, seq)); err == nil {
									mu.Lock()
									accepted = append(accepted, term)
									mu.Unlock()
								}
								select {
								case <-leading.Done():
								case <-time.After(20 * time.Millisecond):
								}
							}
							// One write held back past the lease, as a
							// leader paused mid-write sends it: by then the
							// next leader has written.
							go func() {
								select {
								case <-time.After(lease + 2*time.Second):
								case <-ctx.Done():
									return
								}
								late <- fenced.Set(context.Background(), "store", term, "late")
							}()
						},
						OnStoppedLeading: func() {
							mu.Lock()
							defer mu.Unlock()
							if !led {
								return
							}
							for k := range tenures {
								if tenures[k].who == i && tenures[k].stop.IsZero() {
									tenures[k].stop = time.Now()
								}
							}
						},
					},
				})
			}
		})
	}
	leader := func() int {
		mu.Lock()
		defer mu.Unlock()
		for _, tn := range slices.Backward(tenures) {
			if tn.stop.IsZero() {
				return tn.who
			}
		}
		return -1
	}
	for r := range rounds {
		var who int
		require.Eventually(t, func() bool { who = leader(); return who >= 0 }, 2*lease+5*time.Second, 10*time.Millisecond, "round %d: nobody leads", r)
		links[who].set(true)
		require.Eventually(t, func() bool { w := leader(); return w >= 0 && w != who }, 2*lease+5*time.Second, 10*time.Millisecond, "round %d: nobody took over from %d", r, who)
		links[who].set(false)
	}
	for r := range rounds {
		select {
		case err := <-late:
			assert.ErrorIs(t, err, election.ErrStaleTerm, "late write %d", r)
		case <-time.After(lease + 5*time.Second):
			t.Fatalf("late write %d never came", r)
		}
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(tenures), rounds+1)
	for k := 1; k < len(tenures); k++ {
		prev, next := tenures[k-1], tenures[k]
		assert.Greater(t, next.term, prev.term, "terms grow from leader to leader")
		if !prev.stop.IsZero() {
			assert.False(t, next.start.Before(prev.stop), "one leader at a time: %d led from %v, before %d stopped at %v",
				next.who, next.start.Format(time.StampMilli), prev.who, prev.stop.Format(time.StampMilli))
		}
	}
	assert.True(t, slices.IsSorted(accepted), "the store took writes in term order")
	t.Logf("%d leaderships, %d fenced writes taken", len(tenures), len(accepted))
}
