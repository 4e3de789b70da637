package chaos

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// electionWatch is oracle O, for the election workload: an observer in the
// test's own process, on Redis directly (so every fault on Redis reaches
// it, client-kill-pubsub and restarts included), records each leader it is
// shown. Judged at the end: each leader shown was a worker's owner; after
// the run, with every worker gone and every hold expired, it shows nobody
// leading within the lease and a wake (it converges); and how long after
// a worker led the observer showed it (logged).
type electionWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   []shown
}

type shown struct {
	at int64 // mono()
	l  election.Leader
}

func watchElection(admin *reentrant.Client, rdb rueidis.Client) *electionWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &electionWatch{cancel: cancel, done: make(chan struct{})}
	leaders := election.New(admin, lockName, election.Options{}).Observe(ctx)
	go func() {
		defer close(w.done)
		for l := range leaders {
			if l.Err != nil { // unseen: the last leader is shown again after
				continue
			}
			w.mu.Lock()
			w.seen = append(w.seen, shown{mono(), l.Leader})
			w.mu.Unlock()
		}
	}()
	return w
}

// last returns the last leader shown.
func (w *electionWatch) last() (election.Leader, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) == 0 {
		return election.Leader{}, false
	}
	return w.seen[len(w.seen)-1].l, true
}

// judge checks oracle O once the run is over, then stops the observer and
// waits until Redis has dropped its subscription (oracle D looks next).
func (w *electionWatch) judge(t *testing.T, r *run, intervals []interval) {
	redistest.Eventually(t, timeout+2*time.Second, "oracle O: the observer shows nobody leading once every hold is gone", func() bool {
		l, ok := w.last()
		return ok && l.Owner == ""
	})
	w.cancel()
	<-w.done
	known := func(owner string) bool {
		_, ok := r.clients.Load(strings.SplitN(owner, ":", 2)[0])
		return ok
	}
	terms := map[election.Term]bool{}
	for _, s := range w.seen {
		if s.l.Owner != "" {
			assert.True(t, known(s.l.Owner), "oracle O: leader %q shown is no worker's owner", s.l.Owner)
			terms[s.l.Term] = true
		}
	}
	var lags []time.Duration
	for _, iv := range intervals {
		i := slices.IndexFunc(w.seen, func(s shown) bool { return s.l.Term >= election.Term(iv.Token) && s.at >= iv.Start })
		if i >= 0 {
			lags = append(lags, time.Duration(w.seen[i].at-iv.Start))
		}
	}
	slices.Sort(lags)
	if len(lags) > 0 {
		t.Logf("oracle O: the observer showed %d changes, %d terms of %d leaderships; shown a leader or a later one %v after it led (median), %v at most",
			len(w.seen), len(terms), len(intervals), lags[len(lags)/2], lags[len(lags)-1])
	}
	redistest.Eventually(t, 5*time.Second, "the observer's subscription gone", func() bool {
		chans, err := r.do("PUBSUB", "CHANNELS").AsStrSlice()
		return err == nil && len(chans) == 0
	})
}
