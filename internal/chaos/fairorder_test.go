package chaos

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// queueSamples watches the fair lock's queue from outside the workers, on
// its own connection to Redis (no proxy, no network fault).
type queueSamples struct {
	once    sync.Once
	done    chan struct{}
	stopped chan struct{}
	seen    []queueSample
}

// queueSample is the queue as one LRANGE saw it, at or after at.
type queueSample struct {
	at    int64
	queue []string
}

// sampleQueue samples the queue every 2ms until stop, keeping each change
// that has two waiters or more (order needs two).
func sampleQueue(rdb rueidis.Client) *queueSamples {
	s := &queueSamples{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		key := "redisson_lock_queue:{" + lockName + "}"
		var last []string
		for {
			select {
			case <-s.done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			at := mono()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			q, err := rdb.Do(ctx, rdb.B().Lrange().Key(key).Start(0).Stop(-1).Build()).AsStrSlice()
			cancel()
			if err != nil || len(q) < 2 || slices.Equal(q, last) {
				continue
			}
			last = q
			s.seen = append(s.seen, queueSample{at, q})
		}
	}()
	return s
}

// stop ends the sampling and returns the samples.
func (s *queueSamples) stop() []queueSample {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
	return s.seen
}

// reorders are the faults after which the order in which waiters' Lock
// calls returned may legitimately differ from the queue's: those that may
// lose the reply of a waiter's winning attempt (the waiter undoes the grant
// and joins the queue again at its end), data-loss (it wipes the queue),
// and those that free the lock under its holder (delete-key, force-unlock:
// the next waiter is granted while the first one's reply is still on its
// way, so the two holds overlap and either Lock may return first).
var reorders = []string{"reset", "client-kill", "kill-restart-redis", "data-loss", "delete-key", "force-unlock"}

// fairOrder is oracle F: whenever the queue showed waiter a ahead of
// waiter b, and both went on, within the same wait, to take the lock, a
// took it first: order is kept among live waiters. A pair is excused when
// one of the reorders faults, or a lost reply (lost: its times, with those
// of replies that came after their hold had expired), came between the
// sample and a's turn, or when a was not live then: its process paused or
// cut off (its turn may run out meanwhile, and Redisson's rules then drop
// it).
func (r *run) fairOrder(samples []queueSample, intervals []interval, lost []int64) {
	turn := map[string]int64{}
	worker := map[string]int{}
	for _, x := range intervals {
		turn[x.Owner] = x.Start
		worker[x.Owner] = x.Worker
	}
	excused := func(a string, from, to int64) bool {
		for _, ev := range r.log {
			if ev.end < from || ev.start > to {
				continue
			}
			notLive := (ev.name == "pause-holder" || ev.name == "partition-holder") && ev.worker == worker[a]
			if notLive || slices.Contains(reorders, ev.name) {
				return true
			}
		}
		i, _ := slices.BinarySearch(lost, from)
		return i < len(lost) && lost[i] <= to
	}
	pairs, bypassed, excusedN := 0, 0, 0
	for _, s := range samples {
		for i, a := range s.queue {
			ta, ok := turn[a]
			if !ok {
				continue
			}
			for _, b := range s.queue[i+1:] {
				tb, ok := turn[b]
				if !ok {
					continue
				}
				pairs++
				if tb > ta {
					continue
				}
				if excused(a, s.at, ta) {
					excusedN++
					continue
				}
				bypassed++
				if bypassed <= 10 {
					r.t.Errorf("oracle F: %s was ahead of %s in the queue at %d but took the lock %v after it; faults near: %s",
						a, b, s.at, time.Duration(ta-tb), r.near(tb))
				}
			}
		}
	}
	r.t.Logf("oracle F: %d queue samples, %d ordered pairs of waiters that took the lock: %d out of order excused by a fault between, %d out of order unexplained",
		len(samples), pairs, excusedN, bypassed)
}
