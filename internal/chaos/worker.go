package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sys/unix"

	"github.com/relock-go/relock/reentrant"
)

// interval is one acquisition as its process saw it: from Lock's return to
// the earliest of Unlock's start and the held context's cancellation, on
// CLOCK_MONOTONIC in nanoseconds.
type interval struct {
	Worker int   `json:"w"`
	Sent   int64 `json:"a"` // when the acquire that won was sent: the hold may exist from then
	Start  int64 `json:"s"`
	End    int64 `json:"e"`
	Token  int64 `json:"t"`
}

// summary is what a worker reports at the end.
type summary struct {
	Acquired int            `json:"acquired"`
	Errors   map[string]int `json:"errors"`
}

func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Environment of a worker process.
const (
	workerEnv = "RELOCK_CHAOS_WORKER" // "id|redis addr|store socket|acquisitions"
	lockName  = "chaos"
	timeout   = 600 * time.Millisecond // watchdog timeout: renewal every 200ms
)

// runWorker is a worker process: it takes the fenced lock n times, each time
// incrementing the store's counter by read-modify-write, and prints one JSON
// interval per acquisition, then a summary.
func runWorker(spec string) {
	var id, n int
	var addr, socket string
	fields := strings.SplitN(spec, "|", 4)
	id, _ = strconv.Atoi(fields[0])
	addr, socket = fields[1], fields[2]
	n, _ = strconv.Atoi(fields[3])

	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fatal(err)
	}
	c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: timeout, RepollInterval: 100 * time.Millisecond})
	if err != nil {
		fatal(err)
	}
	st := newStoreClient(socket)
	out := json.NewEncoder(os.Stdout)
	sum := summary{Errors: map[string]int{}}
	f := c.FencedLock(lockName)
	for sum.Acquired < n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		held, token, err := f.Lock(ctx)
		if err != nil {
			sum.Errors[kind(err)]++
			cancel()
			continue
		}
		start := mono()
		// A fresh hold's deadline is its acquire's send time + 0.9 TTL.
		sent := start
		if d, ok := reentrant.LeaseDeadline(held); ok {
			sent = start + int64(time.Until(d)) - int64(timeout-timeout/10)
		}
		var cancelledAt atomic.Int64
		context.AfterFunc(held, func() { cancelledAt.Store(mono()) })
		if v, ok, err := st.read(token); err != nil {
			sum.Errors["store"]++
		} else if ok {
			if _, err := st.write(token, v); err != nil {
				sum.Errors["store"]++
			}
		}
		// The interval ends at the earliest of now (Unlock is next), the
		// held context's cancellation, and the local lease deadline: a
		// process that was starved or paused may see the deadline pass
		// before its watchdog could cancel anything.
		end := mono()
		if at := cancelledAt.Load(); at != 0 && at < end {
			end = at
		}
		if d, ok := reentrant.LeaseDeadline(held); ok {
			end = min(end, mono()+int64(time.Until(d)))
		}
		if err := f.Unlock(held); err != nil {
			sum.Errors[kind(err)]++
		}
		out.Encode(interval{Worker: id, Sent: sent, Start: start, End: end, Token: token})
		sum.Acquired++
		cancel()
	}
	out.Encode(sum)
	c.Close()
	rdb.Close()
}

func kind(err error) string {
	switch {
	case errors.Is(err, reentrant.ErrLockLost):
		return "lost"
	case errors.Is(err, reentrant.ErrNotHeld):
		return "not-held"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "redis"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chaos worker:", err)
	os.Exit(1)
}
