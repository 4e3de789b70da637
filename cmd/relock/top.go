package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// topFrame is one refresh of top: the held locks matching the pattern,
// who holds and who waits, and the waits-for cycles.
type topFrame struct {
	At      time.Time      `json:"at"`
	Scanned int            `json:"locks_scanned"`
	Took    time.Duration  `json:"took_ns"` // to read it from Redis
	Locks   []topRow       `json:"locks"`
	Totals  topTotals      `json:"totals"`
	Cycles  [][]edgeReport `json:"deadlocks"`
}

// topRow is a held lock: its report, and how many clients wait on its
// channel (each relock or Redisson client subscribes once, however many
// of its callers wait).
type topRow struct {
	keyReport
	WaitingClients int64 `json:"waiting_clients"`
}

type topTotals struct {
	Held           int   `json:"held"`
	WaitingClients int64 `json:"waiting_clients"`
	Queued         int   `json:"queued"`
	Deadlocks      int   `json:"deadlocks"`
}

// top shows the held locks, who waits on them and the deadlocks, refreshed
// every --interval until interrupted, as top(1) does; --once prints one
// frame, --json frames as JSON lines.
func (e env) top(args []string) int {
	fs, conn := e.flags("top")
	once := fs.Bool("once", false, "print one frame and exit")
	asJSON := fs.Bool("json", false, "print each frame as one line of JSON")
	interval := fs.Duration("interval", time.Second, "time between frames")
	sortBy := fs.String("sort", "waiting", "order locks by waiting (clients waiting, most first), ttl (least left first) or name")
	rest, code, ok := e.parse(fs, args, 0)
	if !ok {
		return code
	}
	if len(rest) > 1 {
		return e.fail(exitUsage, "top takes at most one PATTERN")
	}
	if !slices.Contains([]string{"waiting", "ttl", "name"}, *sortBy) || *interval <= 0 {
		return e.fail(exitUsage, "--sort takes waiting, ttl or name, and --interval a positive duration")
	}
	pattern := "*"
	if len(rest) == 1 {
		pattern = rest[0]
	}
	rdb, locks, closeAll, err := conn.clients(e, reentrant.Options{Logger: e.log})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeAll()
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for {
		f, err := topFrameOf(ctx, rdb, locks, pattern, *sortBy)
		switch {
		case ctx.Err() != nil:
			return exitOK
		case err != nil:
			return e.fail(exitFor(err), "%v", err)
		case *asJSON:
			writeJSONLine(e.stdout, f)
		default:
			if !*once {
				fmt.Fprint(e.stdout, "\x1b[H\x1b[2J") // home, clear: the next frame replaces this one
			}
			f.write(e.stdout, pattern)
		}
		if *once {
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(*interval):
		}
	}
}

// topFrameOf reads one frame: the held locks matching pattern (SCAN, a
// 1,000-key page at a time), each inspected, the clients waiting on their
// channels (PUBSUB NUMSUB, one command per node for all of them), and the
// waits-for edges.
func topFrameOf(ctx context.Context, rdb rueidis.Client, locks *reentrant.Client, pattern, sortBy string) (topFrame, error) {
	start := time.Now()
	f := topFrame{At: start.UTC(), Locks: []topRow{}, Cycles: [][]edgeReport{}}
	names, err := scanHashes(ctx, rdb, pattern)
	if err != nil {
		return f, err
	}
	f.Scanned = len(names)
	for _, name := range names {
		info, err := locks.Inspect(ctx, name)
		if err != nil {
			return f, err
		}
		switch info.Kind {
		case reentrant.KindLock, reentrant.KindFair, reentrant.KindPriority, reentrant.KindFenced, reentrant.KindReadWrite, reentrant.KindGroup:
			f.Locks = append(f.Locks, topRow{keyReport: report(info)})
		}
	}
	if err := countWaiting(ctx, rdb, f.Locks); err != nil {
		return f, err
	}
	owners, err := scanWaits(ctx, rdb)
	if err != nil {
		return f, err
	}
	var edges []reentrant.WaitEdge
	for _, o := range owners {
		es, err := locks.WaitsFor(ctx, o)
		if err != nil {
			return f, err
		}
		edges = append(edges, es...)
	}
	for _, c := range findCycles(edges) {
		f.Cycles = append(f.Cycles, edgeReports(c))
	}
	for _, r := range f.Locks {
		f.Totals.Held++
		f.Totals.WaitingClients += r.WaitingClients
		f.Totals.Queued += len(r.Queue)
	}
	f.Totals.Deadlocks = len(f.Cycles)
	sortRows(f.Locks, sortBy)
	f.Took = time.Since(start)
	return f, nil
}

// countWaiting sets each row's waiting clients: the subscribers of its
// lock's channel on every node (a classic subscription lives on the node
// the client chose).
func countWaiting(ctx context.Context, rdb rueidis.Client, rows []topRow) error {
	if len(rows) == 0 {
		return nil
	}
	channels := make([]string, len(rows))
	for i, r := range rows {
		channels[i] = scripts.LockChannel(r.Name)
	}
	for _, node := range rdb.Nodes() {
		counts, err := node.Do(ctx, node.B().PubsubNumsub().Channel(channels...).Build()).AsIntMap()
		if err != nil {
			return err
		}
		for i := range rows {
			rows[i].WaitingClients += counts[channels[i]]
		}
	}
	return nil
}

func sortRows(rows []topRow, by string) {
	slices.SortStableFunc(rows, func(a, b topRow) int {
		switch by {
		case "waiting":
			if d := (b.WaitingClients + int64(len(b.Queue))) - (a.WaitingClients + int64(len(a.Queue))); d != 0 {
				return int(max(min(d, 1), -1))
			}
		case "ttl":
			if d := a.TTLMillis - b.TTLMillis; d != 0 {
				return int(max(min(d, 1), -1))
			}
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// write prints the frame for people.
func (f topFrame) write(w io.Writer, pattern string) {
	fmt.Fprintf(w, "relock top  %s  pattern %q: %d locks held, %d clients waiting, %d queued, %d deadlocks  (read in %v)\n\n",
		f.At.Format("15:04:05"), pattern, f.Totals.Held, f.Totals.WaitingClients, f.Totals.Queued, f.Totals.Deadlocks, f.Took.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTTL\tWAITING\tQUEUED\tHOLDERS")
	for _, r := range f.Locks {
		ttl := "none"
		if r.TTLMillis >= 0 {
			ttl = (time.Duration(r.TTLMillis) * time.Millisecond).Round(100 * time.Millisecond).String()
		}
		var holders []string
		for _, h := range r.Holders {
			holders = append(holders, fmt.Sprintf("%s×%d", h.Owner, h.Count))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Kind, ttl, r.WaitingClients, len(r.Queue), strings.Join(holders, " "))
	}
	tw.Flush()
	for _, c := range f.Cycles {
		parts := make([]string, len(c))
		for i, x := range c {
			parts[i] = fmt.Sprintf("%s waits for %q", x.Waiter, x.Lock)
		}
		fmt.Fprintf(w, "\ndeadlock: %s (held by the next)", strings.Join(parts, " -> "))
	}
	if len(f.Cycles) > 0 {
		fmt.Fprintln(w)
	}
}
