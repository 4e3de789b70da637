package election_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/relock-go/relock/reentrant/election"
)

// The handover figures of docs/election.md:
//
//	go test -run '^$' -bench 'HandOver|RequestResign' -benchtime 400x -count 3 ./reentrant/election

// waitingCandidates stands n candidates of name, one per node, each
// campaigning on a goroutine; the channels receive their leading contexts.
func waitingCandidates(b *testing.B, ctx context.Context, nodes []node, name string) []chan context.Context {
	var got []chan context.Context
	for i, n := range nodes {
		ch := make(chan context.Context, 1)
		got = append(got, ch)
		go func() {
			for {
				leading, _, err := n.election(name).Campaign(ctx, fmt.Sprint(i))
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
					}
					return
				}
				ch <- leading
				<-leading.Done()
			}
		}()
	}
	return got
}

// BenchmarkHandOverToNamed measures, on four clients of one Redis, from a
// leader's Resign(To(owner)) to the named candidate's Campaign returning,
// three candidates waiting, the one named being the youngest (a release
// would wake all three).
func BenchmarkHandOverToNamed(b *testing.B) {
	s := start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := []node{newNode(b, s, 0), newNode(b, s, 0), newNode(b, s, 0), newNode(b, s, 0)}
	e := nodes[0].election("handover")
	got := waitingCandidates(b, ctx, nodes, "handover")
	var leading context.Context
	var at int // the leader's node
	select {
	case leading = <-got[0]:
	case leading = <-got[1]:
		at = 1
	case leading = <-got[2]:
		at = 2
	case leading = <-got[3]:
		at = 3
	}
	var took []time.Duration
	for b.Loop() {
		next := youngest(standingAll(b, e, 4, ""))
		start := time.Now()
		if err := nodes[at].election("handover").Resign(leading, election.To(next.Owner)); err != nil {
			b.Fatal(err)
		}
		at = valueIndex(b, next.Value)
		leading = <-got[at]
		took = append(took, time.Since(start))
	}
	report99(b, took, "handover")
}

// BenchmarkRequestResign measures, on five clients of one Redis, from
// RequestResign(To(owner)) on a client that does not campaign to the named
// candidate's Campaign returning: the leader's Run is told, its function
// returns, it resigns to the one named.
func BenchmarkRequestResign(b *testing.B) {
	s := start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := []node{newNode(b, s, 0), newNode(b, s, 0), newNode(b, s, 0), newNode(b, s, 0)}
	asker := newNode(b, s, 0).election("asked")
	led := make([]chan struct{}, len(nodes))
	for i, n := range nodes {
		led[i] = make(chan struct{}, 1)
		go func() {
			_ = n.election("asked").Run(ctx, fmt.Sprint(i), func(leading context.Context, _ election.Term) error {
				led[i] <- struct{}{}
				<-leading.Done()
				return nil
			})
		}()
	}
	var took []time.Duration
	var asked string // the last leader asked, whose Campaign has ended
	for b.Loop() {
		next := youngest(standingAll(b, asker, 4, asked))
		for i := range led {
			select {
			case <-led[i]:
			default:
			}
		}
		start := time.Now()
		l, err := asker.RequestResign(ctx, election.To(next.Owner))
		if err != nil {
			b.Fatal(err)
		}
		asked = l.Owner
		<-led[valueIndex(b, next.Value)]
		took = append(took, time.Since(start))
	}
	report99(b, took, "request")
}

// youngest is the candidate that stood last and does not lead.
func youngest(cs []election.Candidate) election.Candidate {
	for i := len(cs) - 1; ; i-- {
		if !cs[i].Leads {
			return cs[i]
		}
	}
}

// standingAll waits until n candidates stand, one leading, none of them
// the Campaign whose owner is gone, and returns them.
func standingAll(b *testing.B, e *election.Election, n int, gone string) []election.Candidate {
	begun := time.Now()
	for {
		cs, err := e.Candidates(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(cs) == n && slices.ContainsFunc(cs, func(c election.Candidate) bool { return c.Leads }) &&
			!slices.ContainsFunc(cs, func(c election.Candidate) bool { return c.Owner == gone }) {
			return cs
		}
		if time.Since(begun) > 10*time.Second {
			b.Fatalf("%d candidates, one leading, did not stand within 10s: %+v", n, cs)
		}
		time.Sleep(time.Millisecond)
	}
}

func valueIndex(b *testing.B, v string) int {
	var i int
	if _, err := fmt.Sscan(v, &i); err != nil {
		b.Fatal(err)
	}
	return i
}

// report99 reports the median, the 99th percentile and the largest of ds,
// in ms.
func report99(b *testing.B, ds []time.Duration, what string) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/1e6, what+"-p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100])/1e6, what+"-p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/1e6, what+"-max-ms")
	b.ReportMetric(0, "ns/op")
}
