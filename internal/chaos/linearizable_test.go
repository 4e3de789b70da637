package chaos

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
)

// The model accepts lock histories a correct lock can produce and refuses
// one with two holders at once.
func TestMutexModel(t *testing.T) {
	run := func(ops ...op) bool { return porcupine.CheckOperations(mutexModel.ToModel(), history(ops)) }

	assert.True(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "release", Call: 3, Ret: 4, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 2, Ret: 6, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "release", Call: 7, Ret: 8, Out: "ok"},
	), "a handoff")
	assert.False(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 3, Ret: 4, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "release", Call: 5, Ret: 6, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "release", Call: 7, Ret: 8, Out: "ok"},
	), "two holders at once")
	assert.True(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "lost", Call: 3, Ret: 3, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 4, Ret: 5, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "release", Call: 6, Ret: 7, Out: "notheld"},
		op{Worker: 1, Acq: 2, Kind: "release", Call: 8, Ret: 9, Out: "ok"},
	), "a hold lost, then taken by another")
	assert.False(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 3, Ret: 4, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "lost", Call: 5, Ret: 5, Out: "ok"},
	), "taken before the holder stopped believing")
	assert.True(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "release", Call: 3, Ret: 6, Out: "notheld"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 4, Ret: 5, Out: "ok"},
	), "a hold that expired while its release was on its way")
	assert.False(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 3, Ret: 4, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "release", Call: 5, Ret: 6, Out: "notheld"},
	), "taken by another before the holder let go")
	assert.True(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: math.MaxInt64, Out: "unknown"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 2, Ret: 3, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "release", Call: 4, Ret: 5, Out: "ok"},
	), "an unknown acquire, which may or may not have taken it")
	assert.False(t, run(
		op{Worker: 0, Acq: 1, Kind: "acquire", Call: 1, Ret: 2, Out: "ok"},
		op{Worker: 0, Acq: 1, Kind: "release", Call: 3, Ret: math.MaxInt64, Out: "unknown"},
		op{Worker: 0, Acq: 3, Kind: "acquire", Call: 4, Ret: 5, Out: "ok"},
		op{Worker: 1, Acq: 2, Kind: "acquire", Call: 6, Ret: 7, Out: "ok"},
	), "a release whose outcome is unknown cannot end a later acquisition's hold")
}
