// Package latches deletes relock's unlock latches once their release has
// its reply (see Sweeper).
package latches

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// Sweeper deletes unlock latches once their release has its reply,
// as Redisson does (RedissonBaseLock.unlockInnerAsync sends DEL of the
// latch when the unlock script's reply arrives). A latch only has to
// outlive retries of its own request, and a release that got its reply is
// never sent again; so the latches alive at any moment are those of
// releases in flight, not of every release of the last ten seconds.
//
// Deleting is off the caller's path: Unlock queues the name and returns,
// and one goroutine sends what is queued within a millisecond, many names
// per DEL, all in one pipeline. One DEL never names two hash slots, on any
// client: a cluster proxy that looks like a single node refuses that with
// CROSSSLOT. Close sends what is still queued. A name the queue has no room
// for, or whose DEL fails, expires with its TTL; a failed DEL is logged.
type Sweeper struct {
	rdb   rueidis.Client
	log   *slog.Logger
	queue chan string
}

// sweepBatch is the most names one DEL round deletes; sweepLinger is how
// long the sweeper waits for more names after the first, so that a steady
// stream of unlocks costs one DEL per batch rather than one per unlock. It
// bounds how long an answered latch outlives its reply. sweepWait bounds
// how long one round waits for Redis, and so how long Close waits for the
// round in flight and for each round of what is still queued.
const (
	sweepBatch  = 512
	sweepLinger = time.Millisecond
	sweepWait   = time.Second
)

// New returns a sweeper that deletes with rdb and logs to log; Run runs it.
func New(rdb rueidis.Client, log *slog.Logger) *Sweeper {
	return &Sweeper{rdb: rdb, log: log, queue: make(chan string, 4*sweepBatch)}
}

// Drop queues latch for deletion, unless the queue is full.
func (s *Sweeper) Drop(latch string) {
	select {
	case s.queue <- latch:
	default:
	}
}

// Run deletes queued latches until closing ends, and then those still
// queued.
func (s *Sweeper) Run(closing context.Context) {
	linger := time.NewTimer(sweepLinger)
	linger.Stop()
	names := make([]string, 0, sweepBatch)
	for {
		select {
		case <-closing.Done():
			s.flush(names)
			return
		case name := <-s.queue:
			names = s.gather(append(names[:0], name), linger)
			s.sweep(names, closing)
		}
	}
}

// flush deletes what is still queued, a batch at a time, until the queue
// is empty or Redis does not answer: Close sends the deletes rather than
// leave each latch to its TTL.
func (s *Sweeper) flush(names []string) {
	for {
		names = names[:0]
	gather:
		for len(names) < sweepBatch {
			select {
			case n := <-s.queue:
				names = append(names, n)
			default:
				break gather
			}
		}
		if len(names) == 0 || !s.sweep(names, context.Background()) {
			return
		}
	}
}

// gather adds to names what is queued within sweepLinger, up to
// sweepBatch names.
func (s *Sweeper) gather(names []string, linger *time.Timer) []string {
	linger.Reset(sweepLinger)
	defer linger.Stop()
	for len(names) < sweepBatch {
		select {
		case n := <-s.queue:
			names = append(names, n)
		case <-linger.C:
			return names
		}
	}
	return names
}

// sweep deletes names, one DEL per slot, in one pipeline, waiting for
// Redis at most sweepWait, and reports whether every DEL was answered. A
// latch not deleted expires with its TTL; the first error is logged,
// unless closing has ended (the flush at Close passes a context that never
// does: its errors are logged).
func (s *Sweeper) sweep(names []string, closing context.Context) bool {
	bySlot := map[uint16][]string{}
	for _, n := range names {
		slot := scripts.Slot(n)
		bySlot[slot] = append(bySlot[slot], n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepWait)
	defer cancel()
	err := s.del(ctx, bySlot)
	if err != nil && !scripts.IsReply(err) && ctx.Err() == nil {
		// A connection Redis closed as it went away (a restart) fails
		// the first send with EOF: deleting is idempotent, so once more,
		// on a new connection.
		err = s.del(ctx, bySlot)
	}
	if err != nil && closing.Err() == nil {
		s.log.Warn("relock: deleting answered unlock latches failed; they expire with their TTL", "latches", len(names), "error", err)
	}
	return err == nil
}

// del sends one DEL per slot in one pipeline and returns the first error.
func (s *Sweeper) del(ctx context.Context, bySlot map[uint16][]string) error {
	cmds := make(rueidis.Commands, 0, len(bySlot))
	for _, keys := range bySlot {
		cmds = append(cmds, s.rdb.B().Del().Key(keys...).Build())
	}
	for _, r := range s.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}
