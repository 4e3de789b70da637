package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/reentrant/election/kube"
)

// TestResourceLockDataLoss: Redis restarted empty under client-go's
// leader. Its record gone, the next candidate creates one and leads at
// once, while the old leader leads on until its renew deadline: two
// leaders, as with an API server that lost its data. Terms still grow
// (the counter is floored at the server's clock), so a store that kept
// its data and checks terms (election.Fenced, in another Redis) takes no
// write of the old leader's after the new one's first.
func TestResourceLockDataLoss(t *testing.T) {
	s, store := redistest.Start(t), redistest.Start(t)
	const lease, renew, retry = 3 * time.Second, 2 * time.Second, 200 * time.Millisecond
	fenced := election.NewFenced(newClient(t, store))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type write struct {
		term election.Term
		who  int
	}
	var (
		mu       sync.Mutex
		accepted []write // in the order the store took them
		terms    = map[int]election.Term{}
		leading  = map[int]bool{}
		most     int
	)
	var wg sync.WaitGroup
	locks := make([]*kube.ResourceLock, 2)
	for i := range 2 {
		lock := newLock(t, s, "dataloss", strconv.Itoa(i))
		locks[i] = lock
		wg.Go(func() {
			for ctx.Err() == nil {
				leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
					Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, Name: "dataloss",
					Callbacks: leaderelection.LeaderCallbacks{
						OnStartedLeading: func(led context.Context) {
							term := lock.Term()
							mu.Lock()
							terms[i], leading[i] = term, true
							n := 0
							for _, l := range leading {
								if l {
									n++
								}
							}
							most = max(most, n)
							mu.Unlock()
							for seq := 0; led.Err() == nil; seq++ {
								// The store's order is the order its replies
								// came back in, one writer at a time per
								// leader; the fence decides in Redis.
								mu.Lock()
								err := fenced.Set(ctx, "store", term, fmt.Sprint(i, seq))
								if err == nil {
									accepted = append(accepted, write{term, i})
								}
								mu.Unlock()
								select {
								case <-led.Done():
								case <-time.After(10 * time.Millisecond):
								}
							}
						},
						OnStoppedLeading: func() {
							mu.Lock()
							defer mu.Unlock()
							leading[i] = false
						},
					},
				})
			}
		})
	}
	leaderTerm := func() (int, election.Term) {
		mu.Lock()
		defer mu.Unlock()
		for who, l := range leading {
			if l {
				return who, terms[who]
			}
		}
		return -1, 0
	}
	var first int
	var firstTerm election.Term
	require.Eventually(t, func() bool { first, firstTerm = leaderTerm(); return first >= 0 }, lease+5*time.Second, 10*time.Millisecond)
	time.Sleep(3 * retry)
	s.RestartEmpty()
	// A record written after the data was lost, by the first leader (its
	// renewal found none, and created one) or the other (it created one,
	// and leads beside the first until the first's renew deadline): with
	// a larger term, since terms grow across the loss.
	require.Eventually(t, func() bool {
		return locks[0].Term() > firstTerm || locks[1].Term() > firstTerm
	}, 2*lease+5*time.Second, 10*time.Millisecond, "a record after the data was lost, with a larger term")
	time.Sleep(renew + time.Second) // the old leader, if it led on, has stopped
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	ts := make([]election.Term, len(accepted))
	for k, w := range accepted {
		ts[k] = w.term
	}
	assert.True(t, slices.IsSorted(ts), "the store took no write with a smaller term after a larger one")
	t.Logf("leaders at once, at most: %d; %d writes taken", most, len(accepted))
}
