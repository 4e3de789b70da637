package chaos

import "time"

// latchRounds is oracle L.
func (r *run) latchRounds(gates []gate, workers, rounds int) {
	t := r.t
	byRound := make([][]gate, rounds+1)
	for _, g := range gates {
		byRound[g.Round] = append(byRound[g.Round], g)
	}
	var early, stuck, passed, failedRounds int
	for k := 1; k <= rounds; k++ {
		gs := byRound[k]
		if len(gs) != workers {
			t.Errorf("oracle L: round %d has %d of %d workers", k, len(gs), workers)
			continue
		}
		var lastDown int64
		clean := true
		for _, g := range gs {
			lastDown = max(lastDown, g.Down)
			clean = clean && !g.DownErr
		}
		if !clean {
			failedRounds++
		}
		for _, g := range gs {
			switch {
			case g.Pass != 0 && g.Pass < lastDown:
				early++
				t.Errorf("oracle L: worker %d passed round %d %v before the last count-down was sent", g.Worker, k, time.Duration(lastDown-g.Pass))
			case g.Pass != 0:
				passed++
			case clean:
				stuck++
				t.Errorf("oracle L: worker %d did not pass round %d, whose count-downs all succeeded: %s; faults near: %s", g.Worker, k, g.Err, r.near(lastDown))
			}
		}
	}
	t.Logf("oracle L: %d passes, %d early, %d stuck in rounds whose count-downs all succeeded; %d rounds with a failed count-down", passed, early, stuck, failedRounds)
}
