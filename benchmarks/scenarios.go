package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one scenario's figures for one library in one round.
type result map[string]float64

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// uncontended: one goroutine, one key, acquire+release pairs, every call
// on one ctx from callCtx; warm: on a client that served a burst first.
func uncontended(l lib, s *server, pairs int, callCtx func() (context.Context, context.CancelFunc), warm bool) (result, error) {
	lk, err := l.connect(s.addr)
	if err != nil {
		return nil, err
	}
	if warm {
		if err := warmBurst(lk); err != nil {
			lk.close()
			return nil, err
		}
	}
	before := s.snapshot()
	ctx, cancel := callCtx()
	defer cancel()
	lat := make([]time.Duration, 0, pairs)
	allocs := mallocs()
	start := time.Now()
	for i := 0; i < pairs; i++ {
		t := time.Now()
		unlock, err := lk.lock(ctx, "bench:uncontended")
		if err != nil {
			lk.close()
			return nil, err
		}
		if err := unlock(); err != nil {
			lk.close()
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	el := time.Since(start)
	allocs = mallocs() - allocs
	lk.close()
	res := s.cost(before, s.snapshot(), float64(pairs), "pair")
	res["pairs/s"] = float64(pairs) / el.Seconds()
	res["p50 µs"] = us(percentile(lat, .5))
	res["p99 µs"] = us(percentile(lat, .99))
	res["allocs/pair"] = float64(allocs) / float64(pairs)
	return res, nil
}

// warmBurst makes lk's client a service's: 64 goroutines each take and
// give back locks of their own, at once, for 300 ms, as a service's
// requests do between its lone calls. Clients that switch a connection to
// pipelining on concurrent calls (rueidis) keep it so; pools (go-redis)
// grow. The scenario then measures on the same client.
func warmBurst(lk locker) error {
	const goroutines, span = 64, 300 * time.Millisecond
	stop := time.Now().Add(span)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			name := fmt.Sprintf("bench:warm:%d", g)
			for time.Now().Before(stop) {
				unlock, err := lk.lock(context.Background(), name)
				if err == nil {
					err = unlock()
				}
				if err != nil {
					errs <- fmt.Errorf("warming the client: %w", err)
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range goroutines {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// mallocs returns how many heap objects this process has allocated.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// parallel: 64 goroutines sharing one client, each with its own key and
// its own ctx from callCtx; warm: on a client that served a burst first.
func parallel(l lib, s *server, d time.Duration, callCtx func() (context.Context, context.CancelFunc), warm bool) (result, error) {
	lk, err := l.connect(s.addr)
	if err != nil {
		return nil, err
	}
	if warm {
		if err := warmBurst(lk); err != nil {
			lk.close()
			return nil, err
		}
	}
	before := s.snapshot()
	var pairs, errs atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	allocs := mallocs()
	start := time.Now()
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("bench:parallel:%d", g)
			ctx, cancel := callCtx()
			defer cancel()
			for time.Now().Before(stop) {
				unlock, err := lk.lock(ctx, name)
				if err == nil {
					err = unlock()
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				pairs.Add(1)
			}
		}()
	}
	if !waitAtMost(&wg, d+20*time.Second) {
		// A goroutine that never returns from a lock of its own key is
		// the library's hang (rueidislock's waiter once missed its wake
		// here): the run fails, and the library is left as it is.
		return nil, fmt.Errorf("a goroutine still in lock or unlock 20s after the run's end")
	}
	n := float64(pairs.Load())
	rate := n / time.Since(start).Seconds()
	allocs = mallocs() - allocs
	lk.close()
	res := s.cost(before, s.snapshot(), n, "pair")
	res["pairs/s"] = rate
	res["errors"] = float64(errs.Load())
	res["allocs/pair"] = float64(allocs) / max(n, 1)
	return res, nil
}

// waitAtMost waits for wg, for at most d, and reports whether it ended.
func waitAtMost(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// handoff: clients (8 in the main table) on one lock, each holds it 1ms, and a releaser may not
// try again until someone else has acquired. Handoff latency runs from one
// holder starting its release to the next holder's lock returning: the same
// span whether a library's release waits for Redis (relock, redsync,
// bsm/redislock) or returns before the key is deleted (rueidislock). A run ends after the given acquisitions or after
// limit, whichever comes first.
func handoff(l lib, s *server, clients, acquisitions int, limit time.Duration) (result, error) {
	const hold = time.Millisecond
	lks, closeAll, err := connectN(l, s, clients)
	if err != nil {
		return nil, err
	}
	before := s.snapshot()
	var (
		mu         sync.Mutex
		cond       = sync.NewCond(&mu)
		count      int
		late       int // acquisitions by waiters that got the lock after the run ended
		perClient  = make([]int, clients)
		stop       bool
		acquiredAt = make([]time.Time, acquisitions+clients)
		releasedAt = make([]time.Time, acquisitions+clients)
		longest    time.Duration
		inside     atomic.Bool
		overlaps   atomic.Int64
		errs       atomic.Int64
	)
	start := time.Now()
	timer := time.AfterFunc(limit, func() {
		mu.Lock()
		stop = true
		cond.Broadcast()
		mu.Unlock()
	})
	defer timer.Stop()
	var wg sync.WaitGroup
	for i, lk := range lks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := -1
			for {
				mu.Lock()
				for count == mine && !stop {
					cond.Wait()
				}
				if stop {
					mu.Unlock()
					return
				}
				mu.Unlock()
				asked := time.Now()
				// The context lives until after the unlock: rueidislock ties
				// the hold to it.
				ctx, cancel := context.WithDeadline(context.Background(), start.Add(limit))
				unlock, err := lk.lock(ctx, "bench:handoff")
				got := time.Now()
				if err != nil {
					cancel()
					if time.Now().Before(start.Add(limit)) {
						if errs.Add(1) == 1 {
							fmt.Fprintf(os.Stderr, "%s: first lock error after %v: %v\n", l.name, got.Sub(asked), err)
						}
					}
					continue
				}
				if !inside.CompareAndSwap(false, true) {
					overlaps.Add(1)
				}
				mu.Lock()
				if stop { // the run ended while this one waited
					late++
					mu.Unlock()
					inside.Store(false) // before the release, as below
					unlock()
					cancel()
					return
				}
				n := count
				perClient[i]++
				acquiredAt[n] = got
				longest = max(longest, got.Sub(asked))
				count++
				if count >= acquisitions {
					stop = true
				}
				cond.Broadcast()
				mu.Unlock()
				time.Sleep(hold)
				inside.Store(false)
				released := time.Now()
				if err := unlock(); err != nil {
					errs.Add(1)
				}
				cancel()
				mu.Lock()
				releasedAt[n] = released
				mine = count
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	closeAll()
	var hand []time.Duration
	for n := 1; n < count; n++ {
		hand = append(hand, acquiredAt[n].Sub(releasedAt[n-1]))
	}
	c := float64(count)
	// The rate runs to the last counted acquisition; "all done s" is when
	// every client had stopped, and shows a waiter still stuck after it.
	lastAt := start
	if count > 0 {
		lastAt = acquiredAt[count-1]
	}
	// Commands are counted until every client has stopped, so they are
	// divided among every acquisition made, the late ones included (with
	// 256 clients, a quarter of a 1,000-acquisition run).
	made := float64(count + late)
	res := s.cost(before, s.snapshot(), made, "acq")
	maps.Copy(res, result{
		"acquisitions":    c,
		"handoff p50 µs":  us(percentile(hand, .5)),
		"handoff p99 µs":  us(percentile(hand, .99)),
		"acq/s":           c / max(lastAt.Sub(start), time.Nanosecond).Seconds(),
		"all done s":      elapsed.Seconds(),
		"fewest":          float64(slices.Min(perClient)),
		"most":            float64(slices.Max(perClient)),
		"scripts/acq":     res["cmd:evalsha"] + res["cmd:eval"] + res["cmd:evalsha_ro"] + res["cmd:eval_ro"],
		"longest wait ms": float64(longest.Microseconds()) / 1000,
		"overlaps":        float64(overlaps.Load()),
		"errors":          float64(errs.Load()),
	})
	return res, nil
}

// crowd: 1,000 waiters on one lock across 4 clients, each takes it once and
// lets go at once. It measures how a crowd drains: the time until all have
// passed (or how many passed within limit) and Redis commands per
// acquisition, which is where a thundering herd shows.
func crowd(l lib, s *server, waiters int, limit time.Duration) (result, error) {
	const clients = 4
	lks, closeAll, err := connectN(l, s, clients)
	if err != nil {
		return nil, err
	}
	// Hold the lock while the crowd gathers, so every waiter really waits.
	gate, err := lks[0].lock(context.Background(), "bench:crowd")
	if err != nil {
		closeAll()
		return nil, err
	}
	before := s.snapshot()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var passed, overlaps, errs atomic.Int64
	var inside atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := lks[i%clients].lock(ctx, "bench:crowd")
			if err != nil {
				if ctx.Err() == nil {
					errs.Add(1)
				}
				return
			}
			if !inside.CompareAndSwap(false, true) {
				overlaps.Add(1)
			}
			passed.Add(1)
			inside.Store(false)
			if err := unlock(); err != nil {
				errs.Add(1)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // let the waiters line up
	start := time.Now()
	gateErr := gate()
	wg.Wait()
	elapsed := time.Since(start)
	closeAll()
	if gateErr != nil {
		return nil, gateErr
	}
	n := float64(passed.Load())
	res := s.cost(before, s.snapshot(), n, "acq")
	res["passed"] = n
	res["drain s"] = elapsed.Seconds()
	res["acq/s"] = n / elapsed.Seconds()
	res["overlaps"] = float64(overlaps.Load())
	res["errors"] = float64(errs.Load())
	return res, nil
}

// connectN makes n clients ("processes") of l.
func connectN(l lib, s *server, n int) ([]locker, func(), error) {
	var lks []locker
	closeAll := func() {
		for _, lk := range lks {
			lk.close()
		}
	}
	for i := 0; i < n; i++ {
		lk, err := l.connect(s.addr)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		lks = append(lks, lk)
	}
	return lks, closeAll, nil
}
