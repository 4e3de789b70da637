package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// The synchronizers scenarios (-synchronizers): relock's semaphores through
// the lock scenarios' harness (a semaphore of one permit per key, so the
// figures sit beside relock's own lock), and rate-limiter decisions beside
// go-redis's redis_rate.

var semaphoreLibs = []lib{
	{name: "relock Lock", config: "defaults", connect: newRelock},
	{name: "relock Semaphore", config: "1 permit per key", connect: newRelockSemaphore},
	{name: "relock PermitExpirableSemaphore", config: "1 permit per key, kept by the watchdog", connect: newRelockPermits},
}

type relockSync struct {
	rdb     rueidis.Client
	c       *reentrant.Client
	permits bool
	set     sync.Map // names whose permits are set
}

func newRelockSync(addr string, permits bool) (locker, error) {
	rdb, c, err := relockClient(addr)
	if err != nil {
		return nil, err
	}
	return &relockSync{rdb: rdb, c: c, permits: permits}, nil
}

func newRelockSemaphore(addr string) (locker, error) { return newRelockSync(addr, false) }
func newRelockPermits(addr string) (locker, error)   { return newRelockSync(addr, true) }

func (r *relockSync) lock(ctx context.Context, name string) (func() error, error) {
	if _, done := r.set.LoadOrStore(name, true); !done {
		if _, err := r.c.Semaphore(name).TrySetPermits(ctx, 1); err != nil {
			return nil, err
		}
	}
	if r.permits {
		p, err := r.c.PermitExpirableSemaphore(name).Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return p.Release(ctx) }, nil
	}
	s := r.c.Semaphore(name)
	if err := s.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	return func() error { return s.Release(ctx, 1) }, nil
}

func (r *relockSync) close() { r.c.Close(); r.rdb.Close() }

// limiter makes one rate-limit decision: allowed or not.
type limiter interface {
	allow(ctx context.Context) (bool, error)
	close()
}

type rateLib struct {
	name, config string
	connect      func(addr string) (limiter, error)
}

// rateLimit is the rate every limiter is set to.
const rateLimit = 1000 // per second

var rateLibs = []rateLib{
	{name: "relock RateLimiter", config: "Redisson's sliding window, 1000 per 1s, OVERALL", connect: newRelockLimiter},
	{name: "go-redis/redis_rate", config: "GCRA, PerSecond(1000)", connect: newRedisRate},
}

type relockLimiter struct {
	rdb rueidis.Client
	c   *reentrant.Client
	r   *reentrant.RateLimiter
}

func newRelockLimiter(addr string) (limiter, error) {
	rdb, c, err := relockClient(addr)
	if err != nil {
		return nil, err
	}
	r := c.RateLimiter("bench:rate")
	if _, err := r.TrySetRate(context.Background(), reentrant.Rate{Permits: rateLimit, Interval: time.Second}); err != nil {
		c.Close()
		rdb.Close()
		return nil, err
	}
	return relockLimiter{rdb, c, r}, nil
}

func (l relockLimiter) allow(ctx context.Context) (bool, error) { return l.r.TryAcquire(ctx, 1) }
func (l relockLimiter) close()                                  { l.c.Close(); l.rdb.Close() }

type redisRate struct {
	client *goredis.Client
	l      *redis_rate.Limiter
}

func newRedisRate(addr string) (limiter, error) {
	client := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: 64})
	return redisRate{client, redis_rate.NewLimiter(client)}, nil
}

func (l redisRate) allow(ctx context.Context) (bool, error) {
	res, err := l.l.Allow(ctx, "bench:rate", redis_rate.PerSecond(rateLimit))
	if err != nil {
		return false, err
	}
	return res.Allowed > 0, nil
}

func (l redisRate) close() { l.client.Close() }

// decisions: 64 goroutines sharing one client ask one limiter as fast as
// they can for d.
func decisions(l rateLib, s *server, d time.Duration) (result, error) {
	lim, err := l.connect(s.addr)
	if err != nil {
		return nil, err
	}
	defer lim.close()
	var total, allowed, errs atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				ok, err := lim.allow(context.Background())
				switch {
				case err != nil:
					errs.Add(1)
				case ok:
					allowed.Add(1)
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	return result{"decisions/s": float64(total.Load()) / el, "allowed/s": float64(allowed.Load()) / el, "errors": float64(errs.Load())}, nil
}

// runSynchronizers runs the synchronizer scenarios for rounds and prints
// their medians.
func runSynchronizers(s *server, rounds, pairs int, par time.Duration, callCtx func() (context.Context, context.CancelFunc)) error {
	type row struct {
		scenario, name string
		res            map[string][]float64
	}
	var rows []*row
	get := func(sc, name string) *row {
		for _, r := range rows {
			if r.scenario == sc && r.name == name {
				return r
			}
		}
		r := &row{sc, name, map[string][]float64{}}
		rows = append(rows, r)
		return r
	}
	add := func(sc, name string, res result) {
		r := get(sc, name)
		for k, v := range res {
			r.res[k] = append(r.res[k], v)
		}
	}
	for round := 0; round < rounds; round++ {
		for _, l := range semaphoreLibs {
			s.do("FLUSHALL")
			res, err := uncontended(l, s, pairs, callCtx, false)
			if err != nil {
				return fmt.Errorf("uncontended %s: %w", l.name, err)
			}
			add("1 goroutine, 1 key: pairs/s", l.name, res)
			s.do("FLUSHALL")
			if res, err = parallel(l, s, par, callCtx, false); err != nil {
				return fmt.Errorf("parallel %s: %w", l.name, err)
			}
			add("64 goroutines, own keys: pairs/s", l.name, res)
		}
		for _, l := range rateLibs {
			s.do("FLUSHALL")
			res, err := decisions(l, s, par)
			if err != nil {
				return fmt.Errorf("decisions %s: %w", l.name, err)
			}
			add("rate limiter, 64 goroutines, one limiter", l.name, res)
		}
	}
	slices.SortStableFunc(rows, func(a, b *row) int { return strings.Compare(a.scenario, b.scenario) })
	scenario := ""
	for _, r := range rows {
		if r.scenario != scenario {
			scenario = r.scenario
			fmt.Printf("\n### %s\n\n| library | metrics (medians of %d rounds) |\n|---|---|\n", scenario, rounds)
		}
		fmt.Printf("| %s |", r.name)
		for _, k := range []string{"pairs/s", "p50 µs", "p99 µs", "decisions/s", "allowed/s", "errors"} {
			if v, ok := r.res[k]; ok {
				fmt.Printf(" %s %.1f;", k, median(v))
			}
		}
		fmt.Println()
	}
	return nil
}
