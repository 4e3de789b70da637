package chaos

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/relock-go/relock/reentrant"
)

// The latch workload: round after round, each worker counts down the
// round's latch (set to the number of workers before the run) and then
// awaits it. Oracle L: no worker passes a round's latch before every
// worker's count-down of that round was sent; and a round whose count-downs
// all succeeded opens for every worker.

// latchName is the latch of round k.
func latchName(k int) string { return "chaos:latch:" + strconv.Itoa(k) }

// gate is one worker's round, on CLOCK_MONOTONIC.
type gate struct {
	Worker int   `json:"w"`
	Round  int   `json:"k"`
	Down   int64 `json:"d"` // when CountDown was called
	// DownErr: CountDown failed; its count may or may not have been taken.
	DownErr bool   `json:"de,omitempty"`
	Pass    int64  `json:"p"` // when Await returned nil; 0 if it did not
	Err     string `json:"e,omitempty"`
}

// latchAwait bounds a worker's wait at a latch: past it the round is given
// up (a count-down whose reply was lost may have counted or not).
const latchAwait = 5 * time.Second

// runLatchWorker runs rounds 1..n.
func runLatchWorker(c *reentrant.Client, id, n int, emit func(record), sum *summary) {
	for k := 1; k <= n; k++ {
		l := c.CountDownLatch(latchName(k))
		g := gate{Worker: id, Round: k, Down: mono()}
		if err := l.CountDown(context.Background()); err != nil {
			g.DownErr = true
			sum.Errors[kind(err)]++
		}
		ctx, cancel := context.WithTimeout(context.Background(), latchAwait)
		err := l.Await(ctx)
		cancel()
		if err == nil {
			g.Pass = mono()
			sum.Acquired++
		} else {
			g.Err = err.Error()
			if !errors.Is(err, context.DeadlineExceeded) {
				sum.Errors[kind(err)]++
			}
		}
		emit(record{Gate: &g})
	}
}
