package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// runHerd runs the forced handoff with each number of waiting clients in
// counts, every library in turn, rounds times, and prints the medians: how
// the work per handoff grows with the processes waiting.
func runHerd(s *server, counts string, rounds, acquisitions int, limit time.Duration) error {
	fmt.Printf("Forced handoff by number of waiting clients, %s, redis-server %s on loopback, %s, %d CPUs, %d rounds, medians.\n\n",
		time.Now().Format("2006-01-02"), s.version(), runtime.Version(), runtime.NumCPU(), rounds)
	fmt.Println("| clients | library | scripts/acq | cmds/acq | handoff p50 µs | handoff p99 µs | longest wait ms | acq/s | acquisitions per client, fewest-most |\n|---|---|---|---|---|---|---|---|---|")
	for _, field := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 2 {
			return fmt.Errorf("-herd: %q is not a number of clients (2 or more)", field)
		}
		runs := map[string][]result{}
		for r := 0; r < rounds; r++ {
			for _, l := range libs {
				s.do("FLUSHALL")
				res, err := handoff(l, s, n, acquisitions, limit)
				if err != nil {
					return fmt.Errorf("%d clients, %s: %w", n, l.name, err)
				}
				fmt.Fprintf(os.Stderr, "round %d, %d clients, %s: %v\n", r+1, n, l.name, res)
				runs[l.name] = append(runs[l.name], res)
			}
		}
		for _, l := range libs {
			m := func(k string) float64 {
				var v []float64
				for _, res := range runs[l.name] {
					v = append(v, res[k])
				}
				return median(v)
			}
			fmt.Printf("| %d | %s | %.1f | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f-%.0f |\n", n, l.name,
				m("scripts/acq"), m("cmds/acq"), m("handoff p50 µs"), m("handoff p99 µs"), m("longest wait ms"), m("acq/s"), m("fewest"), m("most"))
		}
	}
	p50, p99, err := wakeFloor(s, 2000)
	if err != nil {
		return fmt.Errorf("wake floor: %w", err)
	}
	fmt.Printf("\nThe least a handoff by message takes here (a script that publishes, another client's subscriber waking a waiting goroutine; no lock): p50 %.0f µs, p99 %.0f µs.\n", us(p50), us(p99))
	return nil
}
