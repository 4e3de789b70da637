package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
)

// deadlocksReport is the deadlocks command's JSON form.
type deadlocksReport struct {
	Edges  []edgeReport   `json:"edges"`
	Cycles [][]edgeReport `json:"cycles"`
}

type edgeReport struct {
	Waiter string    `json:"waiter"`
	Lock   string    `json:"lock"`
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

// deadlocks prints the waits-for edges registered for deadlock detection
// and the cycles among them: exit 0 when there is none, 1 when there is.
func (e env) deadlocks(args []string) int {
	fs, conn := e.flags("deadlocks")
	asJSON := fs.Bool("json", false, "print JSON")
	asDot := fs.Bool("dot", false, "print the waits-for graph in Graphviz's DOT language, each cycle in red (relock deadlocks --dot | dot -Tsvg > waits.svg)")
	rest, end := e.parse(fs, args, 0)
	if end != goOn {
		return int(end)
	}
	if len(rest) != 0 {
		return e.fail(exitUsage, "deadlocks takes no NAME")
	}
	if *asJSON && *asDot {
		return e.fail(exitUsage, "--json and --dot: give one")
	}
	rdb, err := conn.redis()
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer rdb.Close()
	locks, err := reentrant.New(rdb, reentrant.Options{Logger: e.log})
	if err != nil {
		return e.fail(exitFor(err), "%v", err)
	}
	defer locks.Close()
	owners, err := scanWaits(e.ctx, rdb)
	if err != nil {
		return e.fail(exitFor(err), "scan: %v", err)
	}
	var edges []reentrant.WaitEdge
	for _, o := range owners {
		es, err := locks.WaitsFor(e.ctx, o)
		if err != nil {
			return e.fail(exitFor(err), "%v", err)
		}
		edges = append(edges, es...)
	}
	cycles := findCycles(edges)
	switch {
	case *asDot:
		writeDot(e.stdout, edges, cycles)
	case *asJSON:
		r := deadlocksReport{Edges: []edgeReport{}, Cycles: [][]edgeReport{}}
		r.Edges = edgeReports(edges)
		for _, c := range cycles {
			r.Cycles = append(r.Cycles, edgeReports(c))
		}
		writeJSON(e.stdout, r)
	default:
		writeDeadlocks(e.stdout, edges, cycles)
	}
	if len(cycles) > 0 {
		return exitNotFound
	}
	return exitOK
}

func edgeReports(edges []reentrant.WaitEdge) []edgeReport {
	r := []edgeReport{}
	for _, x := range edges {
		r = append(r, edgeReport{x.Waiter, x.Lock, x.Holder, x.Since.UTC()})
	}
	return r
}

func writeDeadlocks(w io.Writer, edges []reentrant.WaitEdge, cycles [][]reentrant.WaitEdge) {
	if len(edges) == 0 {
		fmt.Fprintln(w, "no owner has waited past its DeadlockTimeout")
	}
	for _, x := range edges {
		fmt.Fprintf(w, "owner %s waits for lock %q held by owner %s (since %s)\n", x.Waiter, x.Lock, x.Holder, x.Since.UTC().Format(time.RFC3339Nano))
	}
	for _, c := range cycles {
		parts := make([]string, len(c))
		for i, x := range c {
			parts[i] = fmt.Sprintf("owner %s waits for lock %q held by owner %s", x.Waiter, x.Lock, x.Holder)
		}
		fmt.Fprintf(w, "deadlock: %s\n", strings.Join(parts, "; "))
	}
}

// writeDot writes the waits-for graph in DOT: an owner is a node, and a
// wait an edge from the waiter to the holder, labelled with the lock and
// how long it has waited; the edges and owners of a cycle are red.
func writeDot(w io.Writer, edges []reentrant.WaitEdge, cycles [][]reentrant.WaitEdge) {
	inCycle := map[reentrant.WaitEdge]bool{}
	owners := map[string]bool{}
	for _, c := range cycles {
		for _, x := range c {
			inCycle[x] = true
			owners[x.Waiter], owners[x.Holder] = true, true
		}
	}
	fmt.Fprintln(w, "digraph waits_for {")
	fmt.Fprintln(w, "\tnode [shape=box, fontname=monospace];")
	nodes := map[string]bool{}
	for _, x := range edges {
		nodes[x.Waiter], nodes[x.Holder] = true, true
	}
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		attrs := ""
		if owners[n] {
			attrs = ", color=red, fontcolor=red"
		}
		fmt.Fprintf(w, "\t%q [label=%q%s];\n", n, "owner "+n, attrs)
	}
	for _, x := range edges {
		attrs := ""
		if inCycle[x] {
			attrs = ", color=red, fontcolor=red, penwidth=2"
		}
		label := fmt.Sprintf("waits for %q\n%v", x.Lock, time.Since(x.Since).Round(time.Millisecond))
		fmt.Fprintf(w, "\t%q -> %q [label=%q%s];\n", x.Waiter, x.Holder, label, attrs)
	}
	fmt.Fprintln(w, "}")
}

// findCycles returns each cycle of edges once, starting at its least
// waiter.
func findCycles(edges []reentrant.WaitEdge) [][]reentrant.WaitEdge {
	out := map[string][]reentrant.WaitEdge{}
	for _, x := range edges {
		out[x.Waiter] = append(out[x.Waiter], x)
	}
	var cycles [][]reentrant.WaitEdge
	seen := map[string]bool{}
	var walk func(start string, path []reentrant.WaitEdge, on map[string]bool)
	walk = func(start string, path []reentrant.WaitEdge, on map[string]bool) {
		from := start
		if len(path) > 0 {
			from = path[len(path)-1].Holder
		}
		for _, x := range out[from] {
			next := append(path[:len(path):len(path)], x)
			switch {
			case x.Holder == start:
				key := cycleKey(next)
				if !seen[key] {
					seen[key] = true
					cycles = append(cycles, next)
				}
			case !on[x.Holder] && x.Holder > start: // each cycle from its least owner
				on[x.Holder] = true
				walk(start, next, on)
				delete(on, x.Holder)
			}
		}
	}
	for _, o := range slices.Sorted(maps.Keys(out)) {
		walk(o, nil, map[string]bool{o: true})
	}
	return cycles
}

func cycleKey(c []reentrant.WaitEdge) string {
	var b strings.Builder
	for _, x := range c {
		b.WriteString(x.Waiter + "\x00" + x.Lock + "\x00")
	}
	return b.String()
}

// scanWaits returns the owners with a wait registered, on every node.
func scanWaits(ctx context.Context, rdb rueidis.Client) ([]string, error) {
	keys, err := scanKeys(ctx, rdb, "relock_wait:{*}", "string")
	if err != nil {
		return nil, err
	}
	owners := make([]string, len(keys))
	for i, k := range keys {
		owners[i] = strings.TrimSuffix(strings.TrimPrefix(k, "relock_wait:{"), "}")
	}
	return owners, nil
}
