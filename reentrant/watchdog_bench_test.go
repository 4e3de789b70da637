package reentrant

import (
	"context"
	"fmt"
	"strings"
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
// pipelines (round trips) the client sent, and the client's CPU time.
//
//	go test -run '^$' -bench WatchdogRenewal -benchtime 10x ./reentrant
func BenchmarkWatchdogRenewal(b *testing.B) {
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
	c.watchdog.Close()
	c.watchdog = watchdog.New(watchdog.Config{
		Timeout:   timeout,
		BatchSize: c.opts.RenewBatchSize,
		Renew: func(ctx context.Context, ttl time.Duration, batches [][]*watchdog.Lease) ([][]bool, []error) {
			pipelines.Add(1)
			return c.renew(ctx, ttl, batches)
		},
	})

	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < locks; i += 32 {
				if _, err := c.Lock(fmt.Sprintf("held:%d", i)).Lock(context.Background()); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if c.watchdog.Len() != locks {
		b.Fatalf("%d leases, want %d", c.watchdog.Len(), locks)
	}
	s.Do("CONFIG", "RESETSTAT")
	pipelines.Store(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * timeout / 3)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	info, _ := s.Do("INFO", "commandstats").ToString()
	periods := float64(b.N)
	b.ReportMetric(float64(evalshaCalls(info))/periods, "scripts/period")
	b.ReportMetric(float64(pipelines.Load())/periods, "roundtrips/period")
	b.ReportMetric(float64(cpu.Microseconds())/1000/periods, "cpu-ms/period")
	b.ReportMetric(0, "ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// evalshaCalls reads cmdstat_evalsha's calls from INFO commandstats.
func evalshaCalls(info string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			var n int64
			fmt.Sscanf(rest, "%d", &n)
			return n
		}
	}
	return 0
}
