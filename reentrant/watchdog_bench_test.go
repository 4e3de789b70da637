package reentrant

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/watchdog"
)

// BenchmarkWatchdogRenewal holds 10,000 locks on a real redis-server and
// measures, per renewal period (one op), the renew.lua calls Redis ran, the
// pipelines (round trips) the client sent, the time Redis spent running
// them, and the client's CPU time. On one node a renewal script call
// takes holds of any slots, so names in some 7,800 slots ("distinct") fill
// batches as names that share a hash tag ("tagged") do; behind a cluster
// proxy, or on a cluster, distinct names take about one call per slot, in
// the same pipeline.
//
//	go test -run '^$' -bench WatchdogRenewal -benchtime 10x ./reentrant
func BenchmarkWatchdogRenewal(b *testing.B) {
	b.Run("names=distinct", func(b *testing.B) { benchmarkRenewal(b, "held:%d") })
	b.Run("names=tagged", func(b *testing.B) { benchmarkRenewal(b, "{held}:%d") })
}

func benchmarkRenewal(b *testing.B, names string) {
	const locks = 10000
	const timeout = 3 * time.Second // a 1s period keeps the run short
	s := redistest.Start(b)
	c, err := New(s.Client(), Options{WatchdogTimeout: timeout})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// Count the pipelines: one renew call is one DoMulti.
	var pipelines atomic.Int64
	c.holds.watchdog.Close()
	c.holds.watchdog = watchdog.New(watchdog.Config{
		Timeout:   timeout,
		BatchSize: c.opts.RenewBatchSize,
		Renew: func(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
			pipelines.Add(1)
			return c.holds.renewals.renew(ctx, ttl, batches)
		},
	})

	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < locks; i += 32 {
				if _, err := c.Lock(fmt.Sprintf(names, i)).Lock(context.Background()); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c.holds.watchdog.Len() != locks {
		b.Fatalf("%d leases, want %d", c.holds.watchdog.Len(), locks)
	}
	s.Do("CONFIG", "RESETSTAT")
	pipelines.Store(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * timeout / 3)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	evalsha := s.CommandStats()["evalsha"]
	periods := float64(b.N)
	calls, spent := evalsha.Calls, time.Duration(evalsha.Usec)*time.Microsecond
	b.ReportMetric(float64(calls)/periods, "scripts/period")
	b.ReportMetric(float64(spent.Microseconds())/1000/periods, "redis-ms/period")
	b.ReportMetric(float64(pipelines.Load())/periods, "roundtrips/period")
	b.ReportMetric(float64(cpu.Microseconds())/1000/periods, "cpu-ms/period")
	b.ReportMetric(0, "ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
