package chaos

import (
	"strings"
	"time"
)

// deadlocks is oracle G, for the deadlock and ordered workloads, whose
// workers each hold one lock while they wait for their second (op kind
// "second:<lock>"). Two such waits by two workers for each other's locks,
// at the same time, are a deadlock: it must end (a waiter gives up with
// ErrDeadlock, and the other goes on) within DeadlockTimeout and a re-poll
// interval, plus the slack oracle E allows, of the time faults leave
// unexplained. Every ErrDeadlock must name a cycle that was there: another
// worker waited for the other lock while this one waited, until at least
// DeadlockTimeout after this wait began (the check that found it came no
// sooner). A worker whose wait ended in an error while a fault had it cut
// off from Redis could not take its edge out (docs/deadlocks.md): it
// counts as waiting until the edge expires. The ordered workload takes its
// locks in one order, so it must see no ErrDeadlock at all.
func (r *run) deadlocks(ops []op, lost []int64) {
	var waits []op
	for _, o := range ops {
		if strings.HasPrefix(o.Kind, "second:") {
			waits = append(waits, o)
		}
	}
	after := int64(2 * timeout)
	var spans []span
	for _, ev := range r.log {
		spans = append(spans, span{ev.start, ev.end + int64(r.aftermath(ev.name))})
	}
	for _, at := range lost {
		spans = append(spans, span{at, at + after})
	}
	merged := merge(spans)
	bound := int64(deadlockTimeout + repoll + liveSlack)
	victims, cycles, longest, unreal, long := 0, 0, int64(0), 0, 0
	for i, x := range waits {
		if x.Out == "deadlock" {
			victims++
			real := false
			for _, y := range waits {
				if y.Worker != x.Worker && y.Kind != x.Kind && y.Call <= x.Ret && r.edgeEnd(y) >= x.Call+int64(deadlockTimeout) {
					real = true
					break
				}
			}
			if !real {
				unreal++
				r.t.Errorf("oracle G: worker %d gave up with ErrDeadlock (waited %v, monotonic %d to %d) with no other worker waiting for the other lock; faults near it: %s",
					x.Worker, time.Duration(x.Ret-x.Call), x.Call, x.Ret, r.near(x.Ret))
			}
		}
		for _, y := range waits[i+1:] {
			if y.Worker == x.Worker || y.Kind == x.Kind {
				continue
			}
			from, to := max(x.Call, y.Call), min(x.Ret, y.Ret)
			if from >= to {
				continue
			}
			cycles++
			u := uncovered(merged, from, to)
			longest = max(longest, u)
			if u > bound {
				long++
				r.t.Errorf("oracle G: workers %d and %d waited for each other's locks for %v (monotonic %d to %d), %v of it unexplained by faults; faults near it: %s",
					x.Worker, y.Worker, time.Duration(to-from), from, to, time.Duration(u), r.near(to))
			}
		}
	}
	if r.workload == "ordered" && victims > 0 {
		r.t.Errorf("oracle G: %d ErrDeadlock with the locks always taken in one order", victims)
	}
	r.t.Logf("oracle G: %d waits for a second lock, %d deadlocks (pairs of workers waiting for each other), the longest %v unexplained (bound %v); %d ErrDeadlock, %d with no cycle, %d deadlocks over the bound",
		len(waits), cycles, time.Duration(longest), time.Duration(bound), victims, unreal, long)
}

// edgeEnd is when wait y's edge was gone at the latest: when the wait
// ended, or, for one that ended in an error while a fault had its worker
// cut off from Redis (so that its DEL may have failed), when the edge
// expired: a waits-for edge lives 2 × RepollInterval + 1s.
func (r *run) edgeEnd(y op) int64 {
	if y.Out != "error" {
		return y.Ret
	}
	for _, ev := range r.log {
		cutOff := ev.name == "blackhole" || ev.name == "kill-restart-redis" || ev.name == "data-loss" ||
			ev.name == "client-kill" || ev.name == "reset" || (ev.name == "partition-holder" && ev.worker == processOf(r.workload, y.Worker))
		if cutOff && ev.start <= y.Ret && y.Ret <= ev.end+int64(100*time.Millisecond) {
			return y.Ret + int64(2*repoll+time.Second)
		}
	}
	return y.Ret
}
