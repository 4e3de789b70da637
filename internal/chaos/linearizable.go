package chaos

import "github.com/anishathalye/porcupine"

// mutexState is the lock in the model: the acquisition that holds it (-1
// when free), and whether the hold is an orphan, taken by an acquire whose
// outcome its caller never learned. Nothing renews or releases an orphan: it
// may expire at any moment. Holds are told apart by acquisition, not by
// worker: a release whose outcome is unknown can only ever end its own
// acquisition's hold (each acquisition has its own owner), never a later one
// of the same worker.
type mutexState struct {
	holder int64
	orphan bool
}

var (
	free   = mutexState{holder: -1}
	orphan = mutexState{holder: -2, orphan: true}
)

// mutexModel is oracle C's model: a lock that one worker holds at a time.
// Workers do not re-enter in the suite, so a count is not needed.
var mutexModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{free} },
	Step: func(state, input, output any) []any {
		s, in := state.(mutexState), input.(op)
		takeable := s.holder == -1 || s.orphan
		switch in.Kind + "/" + output.(string) {
		case "acquire/ok":
			if takeable {
				return []any{mutexState{holder: in.Acq}}
			}
		case "acquire/unknown":
			// Whose orphan it is does not matter (nothing will release
			// it), so all orphans are one state and the search stays small.
			if takeable {
				return []any{s, orphan}
			}
			return []any{s}
		case "release/ok":
			if s.holder == in.Acq && !s.orphan {
				return []any{free}
			}
		case "release/notheld":
			// The hold may have expired while the release was on its way
			// (Redis stalled past the TTL): it ends within the call. An
			// acquisition by another before the call began stays illegal.
			if s.holder == in.Acq {
				return []any{free}
			}
			return []any{s}
		case "release/unknown":
			if s.holder == in.Acq {
				return []any{s, free}
			}
			return []any{s}
		case "lost/ok":
			// The holder stopped believing: from the lock's side, its hold
			// may end now (it expires after the local deadline).
			if s.holder == in.Acq {
				return []any{s, free}
			}
			return []any{s}
		}
		return nil
	},
}

// history turns the workers' ops into porcupine operations.
func history(ops []op) []porcupine.Operation {
	h := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		h[i] = porcupine.Operation{ClientId: o.Worker, Input: o, Call: o.Call, Output: o.Out, Return: o.Ret}
	}
	return h
}
