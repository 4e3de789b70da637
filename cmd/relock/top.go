package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
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
	At       time.Time      `json:"at"`
	Scanned  int            `json:"locks_scanned"` // hash keys known (see topScan)
	Scanning bool           `json:"scanning"`      // a pass over the keys is under way
	Commands int            `json:"commands"`      // sent to read this frame
	Took     time.Duration  `json:"took_ns"`       // to read it from Redis
	Locks    []topRow       `json:"locks"`
	Totals   topTotals      `json:"totals"`
	Cycles   [][]edgeReport `json:"deadlocks"`
}

// topRow is a held lock: its report, and how many clients wait on its
// channel (each relock or Redisson client subscribes once, however many
// of its callers wait).
type topRow struct {
	keyReport
	WaitingClients int64 `json:"waiting_clients"`
	// RenewedAgo is how long ago the hold was last renewed, as its TTL
	// tells: --watchdog-timeout, the TTL each renewal sets, minus what is
	// left (absent for a TTL past it: a lease of its own, not renewed).
	// Late: past half of it, when the holder is told its renewals are
	// late (Hooks.RenewalLate); it loses the hold at 0.9 of it.
	RenewedAgoMillis *int64 `json:"renewed_ago_ms,omitempty"`
	Late             bool   `json:"late,omitempty"`
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
	f, conn, end := e.topFlags(args)
	if end != goOn {
		return int(end)
	}
	locks, closeAll, err := conn.locks(e, reentrant.Options{Logger: e.log})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer closeAll()
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s := &topScreen{e: e, f: f,
		reader: &topReader{rdb: locks.Rueidis(), locks: locks, limit: f.limit, watchdog: f.watchdog},
		view:   &topView{pattern: f.pattern, sortBy: f.sortBy}}
	if !f.once && !f.asJSON {
		var restore func()
		s.keys, restore = topKeys(e.stdin)
		defer restore()
	}
	return s.run(ctx)
}

// topFlags are top's flags and PATTERN.
type topFlags struct {
	once, asJSON bool
	interval     time.Duration
	watchdog     time.Duration
	sortBy       string
	limit        int
	pattern      string
}

// topFlags parses top's arguments; ok is false after it printed why they
// are wrong, code then being the exit code.
func (e env) topFlags(args []string) (f topFlags, conn *connFlags, end exit) {
	fs, conn := e.flags("top")
	fs.BoolVar(&f.once, "once", false, "print one frame and exit")
	fs.BoolVar(&f.asJSON, "json", false, "print each frame as one line of JSON")
	fs.DurationVar(&f.interval, "interval", time.Second, "time between frames")
	fs.DurationVar(&f.watchdog, "watchdog-timeout", 30*time.Second, "the holders' WatchdogTimeout (Redisson's lockWatchdogTimeout), which each renewal sets as the TTL: how long ago a hold was renewed is this minus its TTL")
	fs.StringVar(&f.sortBy, "sort", "waiting", "order locks by waiting (clients waiting, most first), ttl (least left first) or name")
	fs.IntVar(&f.limit, "limit", 50, "show at most this many locks: the most waited on, or with --sort name the first")
	rest, end := e.parse(fs, args, 0)
	switch {
	case end != goOn:
		return f, nil, end
	case len(rest) > 1:
		return f, nil, exit(e.fail(exitUsage, "top takes at most one PATTERN"))
	case !slices.Contains(sortOrders, f.sortBy):
		return f, nil, exit(e.fail(exitUsage, "--sort %q: it takes %s", f.sortBy, strings.Join(sortOrders, ", ")))
	case f.interval <= 0:
		return f, nil, exit(e.fail(exitUsage, "--interval %v: it must be positive", f.interval))
	case f.watchdog <= 0:
		return f, nil, exit(e.fail(exitUsage, "--watchdog-timeout %v: it must be positive", f.watchdog))
	case f.limit <= 0:
		return f, nil, exit(e.fail(exitUsage, "--limit %d: it must be 1 or more", f.limit))
	}
	f.pattern = "*"
	if len(rest) == 1 {
		f.pattern = rest[0]
	}
	return f, conn, goOn
}

// topScreen is one run of top: what it reads, how it shows it, and the
// keys pressed (nil when it takes none: --once, --json, no terminal).
type topScreen struct {
	e      env
	f      topFlags
	reader *topReader
	view   *topView
	keys   <-chan byte
}

// run reads and shows frames until ctx ends, a key quits, or --once.
func (s *topScreen) run(ctx context.Context) int {
	var frame topFrame
	read := true
	for {
		if read && !s.view.paused {
			var err error
			frame, err = s.reader.frame(ctx, s.view.pattern, s.view.sortBy)
			switch {
			case ctx.Err() != nil:
				return exitOK
			case err != nil:
				return s.e.fail(exitFor(err), "%v", err)
			}
		}
		s.show(frame)
		if s.f.once {
			return exitOK
		}
		var done bool
		if read, done = s.next(ctx); done {
			return exitOK
		}
	}
}

// show writes frame as the flags say: a JSON line, a frame once, or a
// screen that replaces the last on a terminal (one after another into a
// pipe or a file, with no control codes).
func (s *topScreen) show(frame topFrame) {
	w := s.e.stdout
	switch {
	case s.f.asJSON:
		writeJSONLine(w, frame)
	case s.f.once:
		frame.write(w, s.view.pattern)
	default:
		if isTerminal(w) {
			fmt.Fprint(w, "\x1b[H\x1b[2J") // home, clear: the next frame replaces this one
		} else {
			fmt.Fprintln(w)
		}
		sortRows(frame.Locks, s.view.sortBy)
		frame.write(w, s.view.pattern)
		if s.keys != nil {
			s.view.footer(w)
		}
	}
}

// next waits for what comes after a frame: the interval (read a new
// one), a key (read again when it changed the pattern, else redraw what
// was read: a new order, a pause), or the end (done).
func (s *topScreen) next(ctx context.Context) (read, done bool) {
	select {
	case <-ctx.Done():
		return false, true
	case <-time.After(s.f.interval):
		return true, false
	case k, ok := <-s.keys:
		quit, newPattern := s.view.press(k)
		if quit || !ok {
			fmt.Fprintln(s.e.stdout)
			return false, true
		}
		if newPattern {
			s.reader.scan = topScan{}
		}
		return newPattern, false
	}
}

// topReader reads top's frames. A frame costs the server about the same
// however many keys it holds: SCAN reads at most scanPages pages of 1,000
// keys per node per frame, going on from where the last frame stopped, so
// a large keyspace takes several frames to walk (the frame says it is
// scanning); the locks shown (at most limit) are read with a few commands
// each, pipelined.
type topReader struct {
	rdb      rueidis.Client
	locks    *reentrant.Client
	limit    int
	watchdog time.Duration // --watchdog-timeout
	scan     topScan
	sent     int // commands sent for the frame being read
}

// topScan walks the keyspace across frames: a cursor per node, the hash
// keys found in this pass, and those of the last complete one.
type topScan struct {
	cursors map[string]uint64
	found   map[string]bool
	last    []string
	passing bool // a pass is under way
}

// scanPages bounds the SCAN pages one frame reads per node.
const scanPages = 10

// frame reads one frame: the hash keys found so far (SCAN, bounded), the
// clients waiting on each lock's channel (PUBSUB NUMSUB, 1,000 channels
// per command per node), the limit locks most waited on (or first by
// name) read in one pipeline, and the waits-for edges.
func (t *topReader) frame(ctx context.Context, pattern, sortBy string) (topFrame, error) {
	start := time.Now()
	t.sent = 0
	f := topFrame{At: start.UTC(), Locks: []topRow{}, Cycles: [][]edgeReport{}}
	names, scanning, err := t.step(ctx, pattern)
	if err != nil {
		return f, err
	}
	f.Scanned, f.Scanning = len(names), scanning
	waiting, err := t.countWaiting(ctx, names)
	if err != nil {
		return f, err
	}
	if sortBy != "name" {
		slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(waiting[b], waiting[a]) })
	}
	if len(names) > t.limit {
		names = names[:t.limit]
	}
	if f.Locks, err = t.read(ctx, names, waiting); err != nil {
		return f, err
	}
	if f.Cycles, err = t.cycles(ctx); err != nil {
		return f, err
	}
	for i := range f.Locks {
		f.Locks[i].renewal(t.watchdog)
	}
	for _, r := range f.Locks {
		f.Totals.Held++
		f.Totals.WaitingClients += r.WaitingClients
		f.Totals.Queued += len(r.Queue)
	}
	f.Totals.Deadlocks = len(f.Cycles)
	sortRows(f.Locks, sortBy)
	f.Commands, f.Took = t.sent, time.Since(start)
	return f, nil
}

// step reads up to scanPages SCAN pages per node and returns the hash
// keys known, sorted: those of the last complete pass and those found in
// this one; scanning is true while a pass is under way.
func (t *topReader) step(ctx context.Context, pattern string) (names []string, scanning bool, err error) {
	s := &t.scan
	if !s.passing {
		s.cursors, s.found, s.passing = map[string]uint64{}, map[string]bool{}, true
	}
	done := 0
	nodes := t.rdb.Nodes()
	for addr, node := range nodes {
		cursor, started := s.cursors[addr]
		for page := 0; page < scanPages && !(started && cursor == 0); page++ {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Type("hash").Build()).AsScanEntry()
			t.sent++
			if err != nil {
				return nil, false, err
			}
			for _, k := range e.Elements {
				s.found[k] = true
			}
			cursor, started = e.Cursor, true
		}
		s.cursors[addr] = cursor
		if started && cursor == 0 {
			done++
		}
	}
	if done == len(nodes) {
		s.last, s.passing = slices.Sorted(maps.Keys(s.found)), false
		return slices.Clone(s.last), false, nil
	}
	known := maps.Clone(s.found)
	for _, k := range s.last {
		known[k] = true
	}
	return slices.Sorted(maps.Keys(known)), true, nil
}

// countWaiting returns the clients waiting on each name's lock channel,
// summed over the nodes (a classic subscription lives on the node its
// client chose), 1,000 channels per command.
func (t *topReader) countWaiting(ctx context.Context, names []string) (map[string]int64, error) {
	waiting := make(map[string]int64, len(names))
	for chunk := range slices.Chunk(names, 1000) {
		channels := make([]string, len(chunk))
		for i, n := range chunk {
			channels[i] = scripts.LockChannel(n)
		}
		for _, node := range t.rdb.Nodes() {
			counts, err := node.Do(ctx, node.B().PubsubNumsub().Channel(channels...).Build()).AsIntMap()
			t.sent++
			if err != nil {
				return nil, err
			}
			for i, n := range chunk {
				waiting[n] += counts[channels[i]]
			}
		}
	}
	return waiting, nil
}

// read reads the locks among names in one pipeline, five commands each
// (the hash, its TTL, and whether a fair queue, a priority queue or a
// token counter is beside it), and inspects fully only the fair and
// priority locks with a queue. Hashes that are not held locks are left
// out.
func (t *topReader) read(ctx context.Context, names []string, waiting map[string]int64) ([]topRow, error) {
	b := t.rdb.B()
	var cmds rueidis.Commands
	for _, n := range names {
		d := scripts.DerivedNames(n)
		cmds = append(cmds, b.Hgetall().Key(n).Build(), b.Pttl().Key(n).Build(),
			b.Exists().Key(d.FairQueue).Build(), b.Exists().Key(d.PriorityQueue).Build(), b.Exists().Key(d.Token).Build())
	}
	res := t.rdb.DoMulti(ctx, cmds...)
	t.sent += len(cmds)
	rows := []topRow{}
	for i, n := range names {
		r := res[5*i : 5*i+5]
		fields, err := r[0].AsStrMap()
		if err != nil && !rueidis.IsRedisNil(err) {
			continue // not a hash now, or unreadable: not shown
		}
		if name, l, left, ok := liveLease(n, fields); ok {
			rows = append(rows, topRow{keyReport: keyReport{Name: name, Kind: "client-go-lease", RedisType: "hash",
				TTLMillis: left.Milliseconds(), Token: l.Term, Holders: []entry{{Owner: l.Holder, Count: 1}}, Lease: l}})
			continue
		}
		kind, mode, holders := reentrant.HoldersOf(fields)
		if len(holders) == 0 || kind == reentrant.KindOther {
			continue
		}
		ttl, _ := r[1].AsInt64()
		fair, _ := r[2].AsInt64()
		priority, _ := r[3].AsInt64()
		token, _ := r[4].AsInt64()
		info := reentrant.KeyInfo{Name: n, Kind: kind, RedisType: "hash", TTL: time.Duration(ttl) * time.Millisecond, Mode: mode, Holders: holders}
		if ttl < 0 {
			info.TTL = reentrant.NoExpiry
		}
		switch {
		case kind != reentrant.KindLock:
		case fair+priority > 0:
			full, err := t.locks.Inspect(ctx, n)
			t.sent += 8
			if err != nil {
				return nil, err
			}
			info = full
		case token > 0:
			info.Kind = reentrant.KindFenced
		}
		rows = append(rows, topRow{keyReport: report(info), WaitingClients: waiting[n]})
	}
	return rows, nil
}

// cycles returns the waits-for cycles among the owners waiting now.
func (t *topReader) cycles(ctx context.Context) ([][]edgeReport, error) {
	owners, err := scanWaits(ctx, t.rdb)
	if err != nil {
		return nil, err
	}
	var edges []reentrant.WaitEdge
	for _, o := range owners {
		es, err := t.locks.WaitsFor(ctx, o)
		if err != nil {
			return nil, err
		}
		edges = append(edges, es...)
	}
	out := [][]edgeReport{}
	for _, c := range findCycles(edges) {
		out = append(out, edgeReports(c))
	}
	return out, nil
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

// renewal sets how long ago r was renewed and whether that is late, for
// holders whose WatchdogTimeout is wd. A client-go lease record is renewed
// by its elector, on a lease of its own: not told.
func (r *topRow) renewal(wd time.Duration) {
	ago := wd.Milliseconds() - r.TTLMillis
	if r.TTLMillis < 0 || ago < 0 || r.Lease != nil {
		return
	}
	r.RenewedAgoMillis, r.Late = &ago, ago > wd.Milliseconds()/2
}

// write prints the frame for people.
func (f topFrame) write(w io.Writer, pattern string) {
	scanning := ""
	if f.Scanning {
		scanning = fmt.Sprintf(", scanning (%d keys so far)", f.Scanned)
	}
	fmt.Fprintf(w, "relock top  %s  pattern %q: %d locks held, %d clients waiting, %d queued, %d deadlocks  (%d commands, read in %v%s)\n\n",
		f.At.Format("15:04:05"), pattern, f.Totals.Held, f.Totals.WaitingClients, f.Totals.Queued, f.Totals.Deadlocks, f.Commands, f.Took.Round(time.Millisecond), scanning)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tTTL\tRENEWED\tWAITING\tQUEUED\tHOLDERS")
	for _, r := range f.Locks {
		ttl := "none"
		if r.TTLMillis >= 0 {
			ttl = (time.Duration(r.TTLMillis) * time.Millisecond).Round(100 * time.Millisecond).String()
		}
		renewed := "-"
		if r.RenewedAgoMillis != nil {
			renewed = (time.Duration(*r.RenewedAgoMillis) * time.Millisecond).Round(100*time.Millisecond).String() + " ago"
			if r.Late {
				renewed += " LATE"
			}
		}
		var holders []string
		for _, h := range r.Holders {
			holders = append(holders, fmt.Sprintf("%s×%d", h.Owner, h.Count))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Name, r.Kind, ttl, renewed, r.WaitingClients, len(r.Queue), strings.Join(holders, " "))
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

// isTerminal reports whether w is a terminal, where a frame may clear the
// screen; a pipe or a file gets no control codes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
