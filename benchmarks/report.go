package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

type scenario struct {
	name, unit string
	run        func(lib) (result, error)
}

// ctxKind is a context a user passes to every call of scenarios 1 and 2.
type ctxKind struct {
	name string
	make func() (context.Context, context.CancelFunc)
}

// clientState is a client's state when scenarios 1 and 2 measure it.
type clientState struct {
	name string
	warm bool
}

// clientStates parses -state.
func clientStates(list string) ([]clientState, error) {
	var states []clientState
	for _, name := range strings.Split(list, ",") {
		switch name {
		case "cold", "warm":
			states = append(states, clientState{name, name == "warm"})
		default:
			return nil, fmt.Errorf("-state %q: want cold or warm", name)
		}
	}
	return states, nil
}

// contextKinds parses -ctx.
func contextKinds(list string) ([]ctxKind, error) {
	var kinds []ctxKind
	for _, name := range strings.Split(list, ",") {
		k := ctxKind{name: name}
		switch name {
		case "background":
			k.make = func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }
		case "cancel":
			k.make = func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
		case "deadline":
			k.make = func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Hour)
			}
		default:
			return nil, fmt.Errorf("-ctx %q: want background, cancel or deadline", name)
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// rawRun is one run's every round, as -raw writes it and -merge reads it.
type rawRun struct {
	Date, Commit, Redis, Go, Platform string
	Rounds                            int
	Ceiling                           float64 // lock scripts/s (scenario 6)
	Libs                              []libInfo
	Scenarios                         []rawScenario
}

type libInfo struct{ Name, Config string }

type rawScenario struct {
	Name, Unit string
	// Results[lib][metric] holds one value per round.
	Results map[string]map[string][]float64
}

func newRawRun(rounds int, ceiling float64, libs []lib) rawRun {
	r := rawRun{Date: time.Now().Format("2006-01-02 15:04 MST"), Go: goVersion(), Rounds: rounds, Ceiling: ceiling, Commit: commit()}
	for _, l := range libs {
		r.Libs = append(r.Libs, libInfo{l.name, l.config})
	}
	return r
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "?"
}

// commit is the relock commit the runner was built from, as the build
// recorded it or, where it recorded none (-buildvcs=false), as git tells it
// of the directory it runs in; "+" when the tree had changes.
func commit() string {
	var rev, dirty string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+"
				}
			}
		}
	}
	if rev == "" {
		out, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return "?"
		}
		rev = strings.TrimSpace(string(out))
		if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); len(st) > 0 {
			dirty = "+"
		}
	}
	return rev[:min(7, len(rev))] + dirty
}

func writeRaw(path string, r rawRun) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// printMerged prints the tables of the runs in paths taken together: every
// round of each, so a median and range span runs made at different times.
func printMerged(paths []string) error {
	var runs []rawRun
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r rawRun
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		runs = append(runs, r)
	}
	printRuns(runs)
	return nil
}

// printRuns prints, for each scenario of the first run, one table of every
// library's figures over the rounds of all runs: the median, and the range
// from the lowest to the highest round in brackets; then relock beside each
// peer on the figures users choose by.
func printRuns(runs []rawRun) {
	fmt.Printf("relock beside its peers: %d runs; each figure the median of every round of them, [lowest-highest] after it.\n\n", len(runs))
	fmt.Println("| run | relock commit | rounds | server ceiling, lock scripts/s | redis-server | Go | machine |\n|---|---|---|---|---|---|---|")
	for _, r := range runs {
		fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %s |\n", r.Date, r.Commit, r.Rounds, r.Ceiling, r.Redis, r.Go, r.Platform)
	}
	libs := runs[0].Libs
	fmt.Println("\n| library | configured to block until acquired |\n|---|---|")
	for _, l := range libs {
		fmt.Printf("| %s | %s |\n", l.Name, l.Config)
	}
	var merged []rawScenario
	for _, sc := range runs[0].Scenarios {
		all := rawScenario{Name: sc.Name, Unit: sc.Unit, Results: map[string]map[string][]float64{}}
		for _, r := range runs {
			for _, other := range r.Scenarios {
				if other.Name != sc.Name {
					continue
				}
				for lib, metrics := range other.Results {
					if all.Results[lib] == nil {
						all.Results[lib] = map[string][]float64{}
					}
					for m, v := range metrics {
						all.Results[lib][m] = append(all.Results[lib][m], v...)
					}
				}
			}
		}
		merged = append(merged, all)
	}
	printVerdicts(libs, merged)
	for _, sc := range merged {
		var metrics []string
		for k := range sc.Results[libs[0].Name] {
			if !strings.HasPrefix(k, "cmd:") && !strings.HasPrefix(k, "µs:") {
				metrics = append(metrics, k)
			}
		}
		slices.Sort(metrics)
		fmt.Printf("\n### %s\n\n", sc.Name)
		printTable(libs, sc.Results, "", metrics)
		fmt.Printf("\nRedis commands per %s by name (INFO commandstats; a script's own commands included):\n\n", sc.Unit)
		printTable(libs, sc.Results, "cmd:", commandNames(sc.Results, "cmd:"))
		fmt.Printf("\nRedis's time in commands per %s by name, µs (INFO commandstats; a script's time includes its own commands'):\n\n", sc.Unit)
		printTable(libs, sc.Results, "µs:", commandNames(sc.Results, "µs:"))
	}
	fmt.Printf("\n### 6. Server ceiling\n\n`redis-benchmark -n 200000 -c 50 -r 1000000 EVAL <scripts/acquire.lua> 1 bench:ceiling:__rand_int__ ...`: lock scripts/s on this Redis, in the table of runs above.\n")
}

// verdicts are the figures users choose a library by, in the pair
// scenarios: which metric, and whether lower is better.
var verdicts = []struct {
	scenario, metric string
	lower            bool
}{
	{"1. ", "p50 µs", true},
	{"1. ", "redis cpu µs/pair", true},
	{"2. ", "pairs/s", false},
	{"2. ", "redis cpu µs/pair", true},
}

// printVerdicts prints relock's figure as a multiple of each other
// library's (medians), and says "ahead" or "behind" only where the two
// ranges do not overlap; "level" where they do.
func printVerdicts(libs []libInfo, scs []rawScenario) {
	const me = "relock"
	var others []string
	for _, l := range libs {
		if l.Name != me {
			others = append(others, l.Name)
		}
	}
	fmt.Printf("\n### relock beside each: relock's median as a multiple of the other's; ahead or behind where the ranges do not overlap, level where they do\n\n")
	fmt.Printf("| scenario | figure | %s |\n|---|---|%s\n", strings.Join(others, " | "), strings.Repeat("---|", len(others)))
	for _, v := range verdicts {
		for _, sc := range scs {
			mine := sc.Results[me][v.metric]
			if !strings.HasPrefix(sc.Name, v.scenario) || len(mine) == 0 {
				continue
			}
			row := []string{sc.Name, v.metric}
			for _, o := range others {
				theirs := sc.Results[o][v.metric]
				if len(theirs) == 0 {
					row = append(row, "")
					continue
				}
				row = append(row, fmt.Sprintf("%.2fx %s", median(mine)/median(theirs), verdict(mine, theirs, v.lower)))
			}
			fmt.Printf("| %s |\n", strings.Join(row, " | "))
		}
	}
}

// verdict compares two sets of rounds by their ranges.
func verdict(mine, theirs []float64, lower bool) string {
	myLo, myHi := slices.Min(mine), slices.Max(mine)
	theirLo, theirHi := slices.Min(theirs), slices.Max(theirs)
	switch {
	case myHi < theirLo:
		return map[bool]string{true: "ahead", false: "behind"}[lower]
	case myLo > theirHi:
		return map[bool]string{true: "behind", false: "ahead"}[lower]
	}
	return "level"
}

// printTable prints one row per library: the median of each metric named
// prefix+column, with its range over the rounds.
func printTable(libs []libInfo, results map[string]map[string][]float64, prefix string, columns []string) {
	fmt.Printf("| library | %s |\n|---|%s\n", strings.Join(columns, " | "), strings.Repeat("---|", len(columns)))
	for _, l := range libs {
		if results[l.Name] == nil {
			continue // a floor, past scenario 2
		}
		row := []string{l.Name}
		for _, c := range columns {
			row = append(row, spread(results[l.Name][prefix+c]))
		}
		fmt.Printf("| %s |\n", strings.Join(row, " | "))
	}
}

// spread writes a median and its range: "251 [230-280]".
func spread(v []float64) string {
	if len(v) == 0 {
		return ""
	}
	m, lo, hi := median(v), slices.Min(v), slices.Max(v)
	if lo == hi {
		return num(m)
	}
	return fmt.Sprintf("%s [%s-%s]", num(m), num(lo), num(hi))
}

// num writes a figure with as many digits as it needs: 3 significant ones,
// thousands with commas.
func num(f float64) string {
	switch a := max(f, -f); {
	case a >= 1000:
		return thousands(int(f + 0.5))
	case a >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	default:
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
}

// commandNames returns the commands whose figure named prefix+command is at
// least 0.01 per unit for some library (median of its rounds), largest
// first.
func commandNames(results map[string]map[string][]float64, prefix string) []string {
	most := map[string]float64{}
	for _, r := range results {
		for k, v := range r {
			if name, ok := strings.CutPrefix(k, prefix); ok {
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

// median is v's middle value, or the mean of its two middle ones.
func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	switch n := len(v); {
	case n == 0:
		return 0
	case n%2 == 0:
		return (v[n/2-1] + v[n/2]) / 2
	default:
		return v[n/2]
	}
}

// thousands writes n with a comma between thousands: 1,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// profileCPU starts a CPU profile written to path; stop ends it.
func profileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// profileAllocs writes the allocations made so far to path.
func profileAllocs(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
