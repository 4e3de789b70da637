package chaos

import (
	"cmp"
	"slices"
	"time"
)

// liveSlack is how much of a wait oracle E lets go unexplained: the
// attempts and the hand-off that follow a release (a few round trips),
// and a worker process starved of CPU for a moment. A wake-up that goes
// missing costs the holder's remaining TTL or a re-poll, 600ms or 1s here.
const liveSlack = 250 * time.Millisecond

// aftermath is how long after a fault ends it may still hold waiters up:
// a TTL for the faults that can leave a hold that nobody renews or
// releases (a holder paused or cut off, an attempt's reply lost with its
// connection), or make the lock free without a wake-up (the key deleted or
// lost): a waiter's timer runs at most the PTTL it was told, a TTL at most.
// The other faults (latency, a blackhole whose bytes arrive when it lifts,
// a pause of Redis, a flushed script cache, a force unlock, which
// publishes, a killed subscription, whose waiters are woken once it is
// back) explain only their own span.
var aftermath = map[string]time.Duration{
	"pause-holder":       timeout,
	"partition-holder":   timeout,
	"delete-key":         timeout,
	"data-loss":          timeout,
	"kill-restart-redis": timeout,
	"reset":              timeout,
	"client-kill":        timeout,
	// A clock moved forward frees a lock without a wake-up, as a deleted
	// key does; one stepped back keeps every key it finds up to 2 TTLs
	// longer (a hold left unrenewed lives up to 3 TTLs).
	"clock-forward":        timeout,
	"clock-back":           3 * timeout,
	"clock-back-data-loss": 3 * timeout,
}

// aftermath is the aftermath of fault name in this run's workload. A fair
// or priority lock's waiter told "free, but another's turn" backs off up to the
// re-poll interval, not a TTL: when the queue is lost (data-loss) or the
// lock freed with no release (delete-key), the waiters that must re-join
// or take their turn may each be a re-poll away.
func (r *run) aftermath(name string) time.Duration {
	d := aftermath[name]
	if (r.workload == "fair" || r.workload == "priority") && slices.Contains(forgets, name) {
		d = max(d, repoll)
	}
	return d
}

// span is a stretch of CLOCK_MONOTONIC time.
type span struct{ from, to int64 }

// merge returns the union of spans, sorted and disjoint.
func merge(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, s.to)
			continue
		}
		out = append(out, s)
	}
	return out
}

// uncovered returns how much of [from, to] no span of merged covers.
func uncovered(merged []span, from, to int64) int64 {
	i, _ := slices.BinarySearchFunc(merged, from, func(s span, t int64) int { return cmp.Compare(s.to, t) })
	left, at := int64(0), from
	for ; i < len(merged) && merged[i].from < to; i++ {
		if merged[i].from > at {
			left += merged[i].from - at
		}
		at = max(at, merged[i].to)
	}
	if at < to {
		left += to - at
	}
	return left
}

// liveness is oracle E: a waiter waits only while something explains it.
// A hold explains the time from its winning attempt's send until its
// release returned, or, when it ended any other way (lost, an unknown
// release), until its key may have expired and a waiter's timer noticed: a
// TTL after the holder stopped believing, and a TTL more. An acquire with an
// unknown outcome may have left a hold nobody renews: two TTLs after it
// returned. A fault explains its own span and its aftermath; a lost reply
// two TTLs. What is left of a successful wait beyond liveSlack is an
// unexplained wait: a wake-up that went missing, or a waiter held up by
// nothing. Faults come every 50ms by default, and then little time is left
// to judge; RELOCK_CHAOS_GAP=1s leaves most of it.
func (r *run) liveness(intervals []interval, ops []op, lost []int64) {
	after := int64(2 * timeout)
	var spans []span
	for _, x := range intervals {
		to := x.End + after
		if x.Freed != 0 {
			to = x.Freed
		}
		spans = append(spans, span{x.Sent, to})
	}
	for _, o := range ops {
		if o.Kind == "acquire" && o.Out == "unknown" {
			spans = append(spans, span{o.Call, o.Done + after})
		}
	}
	for _, ev := range r.log {
		spans = append(spans, span{ev.start, ev.end + int64(r.aftermath(ev.name))})
	}
	for _, at := range lost {
		spans = append(spans, span{at, at + after})
	}
	merged := merge(spans)
	waits, over := 0, 0
	var longest int64
	for _, o := range ops {
		if o.Kind != "acquire" || o.Out != "ok" {
			continue
		}
		waits++
		u := uncovered(merged, o.Call, o.Ret)
		longest = max(longest, u)
		if u > int64(liveSlack) {
			over++
			if over <= 10 {
				r.t.Errorf("oracle E: worker %d waited %v (monotonic %d to %d), %v of it unexplained; faults near it: %s",
					o.Worker, time.Duration(o.Ret-o.Call), o.Call, o.Ret, time.Duration(u), r.near(o.Ret))
			}
		}
	}
	var judged int64 // time no span explains: where a wait would be judged
	if n := len(merged); n > 0 {
		judged = merged[n-1].to - merged[0].from
		for _, s := range merged {
			judged -= s.to - s.from
		}
	}
	r.t.Logf("oracle E: %d waits; longest unexplained %v (slack %v); %d over the slack; %v of the run unexplained by holds and faults",
		waits, time.Duration(longest), liveSlack, over, time.Duration(judged))
}
