package reentrant_test

import (
	"sort"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// BenchmarkReplicaSync: what replica sync adds to an uncontended Lock (the
// acquire script and WAIT in one pipeline), on a master with 2 healthy
// replicas ("as Redisson" waits for both, as ConnectedReplicas does). Reports the median and p99 Lock latency; Unlock is outside the
// timing.
//
//	go test -run '^$' -bench ReplicaSync -benchtime 2000x -count 3 ./reentrant
func BenchmarkReplicaSync(b *testing.B) {
	r := redistest.StartReplicated(b, 2)
	for _, bc := range []struct {
		name     string
		replicas int
	}{{"off", 0}, {"1 replica", 1}, {"2 replicas", 2}, {"as Redisson", reentrant.ConnectedReplicas}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := reentrant.New(r.Master.Client(), reentrant.Options{ReplicaSync: reentrant.ReplicaSync{Replicas: bc.replicas}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			mu := c.Lock("bench-sync")
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				held, err := mu.Lock(bg())
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := mu.Unlock(held); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
