package election_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// The takeover figures of docs/election.md:
//
//	go test -run '^$' -bench Takeover -benchtime 20x ./reentrant/election

// BenchmarkTakeoverAfterResign measures, on two clients of one Redis,
// from a leader's Resign to the next candidate's Campaign returning, the
// candidate having waited before it.
func BenchmarkTakeoverAfterResign(b *testing.B) {
	s := start(b)
	es := [2]*election.Election{newNode(b, s, 0).election("takeover"), newNode(b, s, 0).election("takeover")}
	ctx := context.Background()
	held, _, err := es[0].Campaign(ctx, "0")
	if err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		next := make(chan context.Context, 1)
		go func() {
			h, _, err := es[(i+1)%2].Campaign(ctx, "x")
			if err != nil {
				b.Error(err)
			}
			next <- h
		}()
		time.Sleep(20 * time.Millisecond) // the candidate waits
		start := time.Now()
		if err := es[i%2].Resign(held); err != nil {
			b.Fatal(err)
		}
		held = <-next
		took = append(took, time.Since(start))
	}
	report(b, took, "takeover")
}

// BenchmarkTakeoverAfterDeath measures, with a 1 s watchdog timeout, from
// the moment a leader's process loses Redis (its client is closed) to the
// next candidate leading, and how long before that the dead leader's
// leading context was cancelled.
func BenchmarkTakeoverAfterDeath(b *testing.B) {
	s := start(b)
	const wd = time.Second
	candidate := newNode(b, s, wd).election("death")
	ctx := context.Background()
	var took, told []time.Duration
	for b.Loop() {
		// The leader dies each round: its "lock lost" warning is what a
		// dying process logs, not news.
		rdb := s.Client()
		c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: wd, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		n := node{rdb, c}
		held, _, err := n.election("death").Campaign(ctx, "leader")
		if err != nil {
			b.Fatal(err)
		}
		next := make(chan time.Time, 1)
		go func() {
			h, _, err := candidate.Campaign(ctx, "next")
			next <- time.Now()
			if err != nil {
				b.Error(err)
				return
			}
			_ = candidate.Resign(h)
		}()
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		n.rdb.Close()
		<-held.Done()
		toldAt := time.Now()
		led := <-next
		took = append(took, led.Sub(start))
		told = append(told, led.Sub(toldAt))
		_ = n.c.Close()
	}
	report(b, took, "takeover")
	report(b, told, "told-before")
}

// report reports the median and the largest of ds, in ms.
func report(b *testing.B, ds []time.Duration, what string) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/1e6, what+"-p50-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/1e6, what+"-max-ms")
	b.ReportMetric(0, "ns/op")
}
