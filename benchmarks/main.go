// Command benchmarks runs relock beside its Go peers (rueidislock, redsync,
// bsm/redislock) on the same scenarios against a redis-server it starts on a
// free loopback port, in alternating rounds, and prints a markdown table of
// the medians.
//
//	cd benchmarks && go run . -rounds 3
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds; each runs every library once per scenario, in turn")
	pairs := flag.Int("pairs", 2000, "acquire+release pairs per uncontended run")
	par := flag.Duration("parallel", 2*time.Second, "length of each 64-goroutine run")
	acqs := flag.Int("handoff", 1000, "acquisitions per forced-handoff run")
	crowdSize := flag.Int("crowd", 1000, "waiters in the crowd")
	limit := flag.Duration("handoff-limit", 20*time.Second, "longest forced-handoff run")
	only := flag.String("only", "", "run just this library")
	keep := flag.Duration("watchdog", 0, "instead of the other scenarios, hold 10,000 locks and measure keeping them alive over this window")
	syncs := flag.Bool("synchronizers", false, "instead of the other scenarios, measure semaphores beside the lock, and rate limiters")
	herd := flag.String("herd", "", "instead of the other scenarios, run the forced handoff with each of these numbers of waiting clients (comma-separated, e.g. 8,64,256)")
	ctxKind := flag.String("ctx", "request", `the context scenarios 1 and 2 pass to every call: "request", one that can be cancelled and has a deadline, as a request handler's, or "background", context.Background()`)
	elect := flag.Bool("election", false, "instead of the other scenarios, measure an election's takeover (after Resign, after the leader died), relock's and, if installed, etcd's")
	floor := flag.Bool("floor", false, "instead of the other scenarios, run scenarios 1 and 2 for relock, rueidislock and Redisson's own lock scripts")
	flag.Parse()
	var callCtx func() (context.Context, context.CancelFunc)
	switch *ctxKind {
	case "request":
		callCtx = func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}
	case "background":
		callCtx = func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }
	default:
		log.Fatalf("-ctx %q: want request or background", *ctxKind)
	}
	if *floor {
		libs = floorLibs()
	}
	if *only != "" {
		libs = slices.DeleteFunc(libs, func(l lib) bool { return l.name != *only })
	}

	s, err := startRedis()
	if err != nil {
		log.Fatal(err)
	}
	defer s.stop()
	// fatalf stops the server first: log.Fatal runs no deferred call, and
	// the server would outlive the runner.
	fatalf := func(format string, args ...any) {
		s.stop()
		log.Fatalf(format, args...)
	}

	if *syncs {
		fmt.Printf("Synchronizers, %s, redis-server %s on loopback, %s, %d CPUs.\n", time.Now().Format("2006-01-02"), s.version(), runtime.Version(), runtime.NumCPU())
		if err := runSynchronizers(s, *rounds, *pairs, *par, callCtx); err != nil {
			fatalf("%v", err)
		}
		return
	}
	if *elect {
		fmt.Printf("Election takeover, %s, redis-server %s on loopback, %s, %d CPUs; %d rounds after Resign.\n\n", time.Now().Format("2006-01-02"), s.version(), runtime.Version(), runtime.NumCPU(), *rounds)
		if err := runElection(s, *rounds); err != nil {
			fatalf("%v", err)
		}
		return
	}
	if *herd != "" {
		if err := runHerd(s, *herd, *rounds, *acqs, *limit); err != nil {
			fatalf("%v", err)
		}
		return
	}
	if *keep > 0 {
		fmt.Printf("### 5. Watchdog: 10,000 held locks, one client, kept alive for %v\n\n| library | cmds/s | client cpu ms/s | keys held |\n|---|---|---|---|\n", *keep)
		for _, l := range libs {
			if l.name == "redsync" || l.name == "bsm/redislock" {
				fmt.Printf("| %s | n/a: no automatic renewal | | |\n", l.name)
				continue
			}
			s.do("FLUSHALL")
			res, err := keepAlive(l, s, 10000, *keep)
			if err != nil {
				fatalf("watchdog, %s: %v", l.name, err)
			}
			fmt.Printf("| %s | %.1f | %.1f | %.0f |\n", l.name, res["cmds/s"], res["client cpu ms/s"], res["keys held"])
		}
		return
	}

	type scenario struct {
		name, unit string
		run        func(lib) (result, error)
	}
	scenarios := []scenario{
		{"1. Uncontended: 1 goroutine, 1 key", "pair", func(l lib) (result, error) { return uncontended(l, s, *pairs, callCtx) }},
		{"2. Parallel: 64 goroutines, one client, own keys", "pair", func(l lib) (result, error) { return parallel(l, s, *par, callCtx) }},
		{"3. Forced handoff: 8 clients, one lock, 1 ms hold", "acquisition", func(l lib) (result, error) { return handoff(l, s, 8, *acqs, *limit) }},
		{fmt.Sprintf("4. Crowd: %s waiters on one lock across 4 clients", thousands(*crowdSize)), "acquisition", func(l lib) (result, error) { return crowd(l, s, *crowdSize, *limit) }},
	}
	if *floor { // Redisson's scripts alone cannot wait
		scenarios = scenarios[:2]
	}
	// results[scenario][lib][metric] = one value per round
	results := make([]map[string]map[string][]float64, len(scenarios))
	for i := range results {
		results[i] = map[string]map[string][]float64{}
	}
	for r := 1; r <= *rounds; r++ {
		for i, sc := range scenarios {
			// Each round starts with the next library, so that none always
			// runs first (on a fresh connection pool, after the previous
			// scenario's cleanup).
			for j := range libs {
				l := libs[(j+r-1)%len(libs)]
				if l.floor && i >= 2 {
					continue // a floor does not wait: scenarios 1 and 2 only
				}
				s.do("FLUSHALL")
				res, err := sc.run(l)
				if err != nil {
					fatalf("%s, %s: %v", sc.name, l.name, err)
				}
				if results[i][l.name] == nil {
					results[i][l.name] = map[string][]float64{}
				}
				for k, v := range res {
					results[i][l.name][k] = append(results[i][l.name][k], v)
				}
				fmt.Fprintf(os.Stderr, "round %d, %s, %s: %v\n", r, sc.name, l.name, res)
			}
		}
	}

	ceil, err := ceiling(s)
	if err != nil {
		fatalf("%v", err)
	}

	fmt.Printf("relock beside its peers, %s, redis-server %s on loopback, %s %s/%s, %d CPUs, %d alternating rounds, medians; scenarios 1 and 2 on a %s ctx.\n\n",
		time.Now().Format("2006-01-02"), s.version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), *rounds, *ctxKind)
	fmt.Println("| library | configured to block until acquired |\n|---|---|")
	for _, l := range libs {
		fmt.Printf("| %s | %s |\n", l.name, l.config)
	}
	defer fmt.Printf("\n### 6. Server ceiling\n\n`redis-benchmark -n 200000 -c 50 -r 1000000 EVAL <scripts/acquire.lua> 1 bench:ceiling:__rand_int__ ...`: %.0f lock scripts/s on this Redis.\n", ceil)
	for i, sc := range scenarios {
		var metrics, perCommand []string
		for k := range results[i][libs[0].name] {
			if name, ok := strings.CutPrefix(k, "cmd:"); ok {
				perCommand = append(perCommand, name)
				continue
			}
			metrics = append(metrics, k)
		}
		slices.Sort(metrics)
		fmt.Printf("\n### %s\n\n", sc.name)
		printTable(results[i], "", metrics)
		fmt.Printf("\nRedis commands per %s by name (INFO commandstats; a script's own commands included):\n\n", sc.unit)
		printTable(results[i], "cmd:", commandNames(results[i]))
	}
}

// printTable prints one row per library: the medians of the metrics named
// prefix+column.
func printTable(results map[string]map[string][]float64, prefix string, columns []string) {
	fmt.Printf("| library | %s |\n|---|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
	for _, l := range libs {
		if results[l.name] == nil {
			continue // a floor, past scenario 2
		}
		row := []string{l.name}
		for _, c := range columns {
			row = append(row, fmt.Sprintf("%.2f", median(results[l.name][prefix+c])))
		}
		fmt.Printf("| %s |\n", strings.Join(row, " | "))
	}
}

// commandNames returns the commands some library sent at least 0.01 times
// per unit (median of its rounds), most sent first.
func commandNames(results map[string]map[string][]float64) []string {
	most := map[string]float64{}
	for _, r := range results {
		for k, v := range r {
			if name, ok := strings.CutPrefix(k, "cmd:"); ok {
				most[name] = max(most[name], median(v))
			}
		}
	}
	var names []string
	for name, m := range most {
		if m >= 0.01 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(most[b], most[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return names
}
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// thousands writes n with a comma between thousands: 1,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
