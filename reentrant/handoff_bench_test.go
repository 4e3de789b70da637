package reentrant_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// BenchmarkForcedHandoff: 8 clients (8 "processes", each its own rueidis
// client) contend for one lock on a real redis-server. Each holds it 1ms,
// and a releaser may not try again until someone else has acquired, so
// every acquisition is a handoff to a waiter. One op is one acquisition.
//
// Reported: handoff latency (release returned -> next Lock returned) p50 and
// p99, acquisitions/s, script calls and all Redis commands per acquisition
// (INFO commandstats), the longest single wait, and overlaps (must be 0).
//
//	go test -run '^$' -bench ForcedHandoff -benchtime 2000x ./reentrant
//
// "8-clients" is the scenario above. "1-client" runs the same 8 contenders
// as goroutines of one client, where a release wakes exactly one of them;
// across processes every subscribed process hears each release (Redisson's
// protocol), and each wakes one of its waiters.
func BenchmarkForcedHandoff(b *testing.B) {
	b.Run("8-clients", func(b *testing.B) { forcedHandoff(b, 8) })
	b.Run("1-client", func(b *testing.B) { forcedHandoff(b, 1) })
}

func forcedHandoff(b *testing.B, clients int) {
	const contenders, hold = 8, time.Millisecond
	s := redistest.Start(b)
	var mus []*reentrant.Lock
	for i := 0; i < clients; i++ {
		c, err := reentrant.New(s.Client(), reentrant.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		mus = append(mus, c.Lock("handoff"))
	}

	var (
		mu         sync.Mutex
		cond       = sync.NewCond(&mu)
		count      int // acquisitions so far
		acquiredAt = make([]time.Time, b.N+contenders)
		releasedAt = make([]time.Time, b.N+contenders)
		longest    time.Duration
		stop       bool
		inside     atomic.Bool
		overlaps   atomic.Int64
		errs       atomic.Int64
	)
	s.Do("CONFIG", "RESETSTAT")
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func(lock *reentrant.Lock) {
			defer wg.Done()
			mine := -1 // the acquisition count after my last release
			for {
				mu.Lock()
				for count == mine && !stop {
					cond.Wait() // nobody else has acquired since my release
				}
				if stop {
					mu.Unlock()
					return
				}
				mu.Unlock()
				asked := time.Now()
				ctx, err := lock.Lock(bg())
				got := time.Now()
				if err != nil {
					errs.Add(1)
					return
				}
				if !inside.CompareAndSwap(false, true) {
					overlaps.Add(1)
				}
				mu.Lock()
				n := count // this acquisition's index
				acquiredAt[n] = got
				longest = max(longest, got.Sub(asked))
				count++
				if count >= b.N {
					stop = true
				}
				cond.Broadcast()
				mu.Unlock()
				time.Sleep(hold)
				inside.Store(false)
				if err := lock.Unlock(ctx); err != nil {
					errs.Add(1)
				}
				released := time.Now()
				mu.Lock()
				releasedAt[n] = released
				mine = count
				mu.Unlock()
			}
		}(mus[i%clients])
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	scripts, commands := commandStats(s)
	// Handoff n: from the return of holder n-1's Unlock to the return of
	// holder n's Lock. The next holder can get the lock before the release's
	// own reply reaches the releaser; that handoff counts as 0.
	var handoffs []time.Duration
	for n := 1; n < count; n++ {
		handoffs = append(handoffs, max(0, acquiredAt[n].Sub(releasedAt[n-1])))
	}
	slices.Sort(handoffs)
	n := float64(count)
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "p99-us")
	b.ReportMetric(n/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(scripts)/n, "scripts/acq")
	b.ReportMetric(float64(commands)/n, "cmds/acq")
	b.ReportMetric(float64(longest.Microseconds())/1000, "maxwait-ms")
	b.ReportMetric(float64(overlaps.Load()+errs.Load()), "overlaps+errors")
	if overlaps.Load() > 0 || errs.Load() > 0 {
		b.Fatalf("%d overlaps, %d errors", overlaps.Load(), errs.Load())
	}
}

// commandStats sums INFO commandstats: script calls (EVALSHA and EVAL) and
// all commands but the benchmark's own INFO and CONFIG.
func commandStats(s *redistest.Server) (scripts, all int64) {
	for name, st := range s.CommandStats() {
		if name == "info" || name == "config" {
			continue // the benchmark's own
		}
		all += st.Calls
		if name == "evalsha" || name == "eval" {
			scripts += st.Calls
		}
	}
	return scripts, all
}
