// Command benchmarks runs relock beside its Go peers (rueidislock, redsync,
// bsm/redislock) on the same scenarios against a redis-server it starts on a
// free loopback port, in alternating rounds, and prints a markdown table of
// the medians.
//
//	cd benchmarks && go run . -rounds 3
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 5, "rounds; each runs every library once per scenario, in turn")
	pairs := flag.Int("pairs", 2000, "acquire+release pairs per uncontended run")
	par := flag.Duration("parallel", 2*time.Second, "length of each 64-goroutine run")
	acqs := flag.Int("handoff", 1000, "acquisitions per forced-handoff run")
	crowdSize := flag.Int("crowd", 1000, "waiters in the crowd")
	limit := flag.Duration("handoff-limit", 20*time.Second, "longest forced-handoff run")
	only := flag.String("only", "", "run just these libraries (names separated by semicolons: some names hold commas)")
	keep := flag.Duration("watchdog", 0, "instead of the other scenarios, hold 10,000 locks and measure keeping them alive over this window")
	syncs := flag.Bool("synchronizers", false, "instead of the other scenarios, measure semaphores beside the lock, and rate limiters")
	herd := flag.String("herd", "", "instead of the other scenarios, run the forced handoff with each of these numbers of waiting clients (comma-separated, e.g. 8,64,256)")
	states := flag.String("state", "cold,warm", `the client states scenarios 1 and 2 run in (comma-separated): "cold", a client that never saw two calls at once; "warm", the same client after a burst of 64 goroutines' pairs on it (warmBurst), as a service's client is`)
	ctxKinds := flag.String("ctx", "background,cancel,deadline", `the contexts scenarios 1 and 2 pass to every call, each its own scenario (comma-separated): "background", context.Background(); "cancel", one that can be cancelled and has no deadline, as a net/http request's; "deadline", one with a deadline as well`)
	raw := flag.String("raw", "", "also write every round's figures to this file (JSON), for -merge")
	merge := flag.String("merge", "", "run nothing: print the tables of the rounds in these -raw files (comma-separated), taken together")
	elect := flag.Bool("election", false, "instead of the other scenarios, measure an election's takeover (after Resign, after the leader died), relock's and, if installed, etcd's")
	floor := flag.Bool("floor", false, "instead of the other scenarios, run scenarios 1 and 2 for relock, rueidislock and Redisson's own lock scripts")
	which := flag.String("scenarios", "1,2,3,4", "the scenarios to run (comma-separated numbers): 1 uncontended, 2 parallel, 3 forced handoff, 4 crowd")
	awake := flag.Bool("awake", false, "keep every CPU out of its idle state while measuring: one spinning process per CPU at the lowest priority, as other work on a server does (on a VM an idle CPU wakes slowly, which then dominates a lone round trip)")
	cpuProfile := flag.String("cpuprofile", "", "write the runner's CPU profile to this file")
	memProfile := flag.String("memprofile", "", "write the runner's allocation profile to this file")
	flag.Parse()
	if *cpuProfile != "" {
		stop, err := profileCPU(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 512
		defer profileAllocs(*memProfile)
	}
	ctxs, err := contextKinds(*ctxKinds)
	if err != nil {
		log.Fatal(err)
	}
	callCtx := ctxs[0].make
	if *floor {
		libs = floorLibs()
	}
	if *only != "" {
		names := strings.Split(*only, ";")
		libs = slices.DeleteFunc(libs, func(l lib) bool { return !slices.Contains(names, l.name) })
	}

	if *merge != "" {
		if err := printMerged(strings.Split(*merge, ",")); err != nil {
			log.Fatal(err)
		}
		return
	}

	if *awake {
		stop, err := keepAwake()
		if err != nil {
			log.Fatal(err)
		}
		defer stop()
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

	warmth, err := clientStates(*states)
	if err != nil {
		log.Fatal(err)
	}
	wanted := func(n string) bool { return slices.Contains(strings.Split(*which, ","), n) }
	var scenarios []scenario
	for _, w := range warmth {
		for _, k := range ctxs {
			if wanted("1") {
				scenarios = append(scenarios, scenario{fmt.Sprintf("1. Uncontended: 1 goroutine, 1 key, %s ctx, %s client", k.name, w.name), "pair",
					func(l lib) (result, error) { return uncontended(l, s, *pairs, k.make, w.warm) }})
			}
		}
	}
	for _, w := range warmth {
		for _, k := range ctxs {
			if wanted("2") {
				scenarios = append(scenarios, scenario{fmt.Sprintf("2. Parallel: 64 goroutines, one client, own keys, %s ctx, %s client", k.name, w.name), "pair",
					func(l lib) (result, error) { return parallel(l, s, *par, k.make, w.warm) }})
			}
		}
	}
	if !*floor && wanted("3") { // Redisson's scripts alone cannot wait
		scenarios = append(scenarios, scenario{"3. Forced handoff: 8 clients, one lock, 1 ms hold", "acquisition", func(l lib) (result, error) { return handoff(l, s, 8, *acqs, *limit) }})
	}
	if !*floor && wanted("4") {
		scenarios = append(scenarios, scenario{fmt.Sprintf("4. Crowd: %s waiters on one lock across 4 clients", thousands(*crowdSize)), "acquisition", func(l lib) (result, error) { return crowd(l, s, *crowdSize, *limit) }})
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
				if l.floor && sc.unit != "pair" {
					continue // a floor does not wait: scenarios 1 and 2 only
				}
				s.do("FLUSHALL")
				res, err := sc.run(l)
				if results[i][l.name] == nil {
					results[i][l.name] = map[string][]float64{}
				}
				if err != nil {
					// One library's failed round does not end the run: it
					// is counted, and its figures are left out.
					fmt.Fprintf(os.Stderr, "round %d, %s, %s: FAILED: %v\n", r, sc.name, l.name, err)
					results[i][l.name]["failed rounds"] = append(results[i][l.name]["failed rounds"], 1)
					continue
				}
				res["failed rounds"] = 0
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
	run := newRawRun(*rounds, ceil, libs)
	run.Redis = s.version()
	run.Platform = fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if *awake {
		run.Platform += ", kept awake (-awake)"
	}
	for i, sc := range scenarios {
		run.Scenarios = append(run.Scenarios, rawScenario{Name: sc.name, Unit: sc.unit, Results: results[i]})
	}
	if *raw != "" {
		if err := writeRaw(*raw, run); err != nil {
			fatalf("%v", err)
		}
	}
	printRuns([]rawRun{run})
}
