package redistest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

//go:embed clockshift/clockshift.c
var clockShiftC []byte

var clockShift struct {
	once sync.Once
	path string
	err  error
}

// clockShiftLib builds clockshift.c into a shared library once per source
// (cached in the system's temporary directory, named by its hash) and
// returns its path.
func clockShiftLib() (string, error) {
	clockShift.once.Do(func() {
		sum := sha256.Sum256(clockShiftC)
		dir := filepath.Join(os.TempDir(), "relock-clockshift-"+hex.EncodeToString(sum[:8]))
		lib := filepath.Join(dir, "clockshift.so")
		if _, err := os.Stat(lib); err == nil {
			clockShift.path = lib
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			clockShift.err = err
			return
		}
		src := filepath.Join(dir, "clockshift.c")
		if err := os.WriteFile(src, clockShiftC, 0o644); err != nil {
			clockShift.err = err
			return
		}
		// Built beside, then renamed: test processes running at once
		// never preload a half-written library.
		tmp := fmt.Sprintf("%s.%d", lib, os.Getpid())
		if out, err := exec.Command("cc", "-O2", "-shared", "-fPIC", "-o", tmp, src).CombinedOutput(); err != nil {
			clockShift.err = fmt.Errorf("cc clockshift.c: %v: %s", err, out)
			return
		}
		clockShift.err = os.Rename(tmp, lib)
		clockShift.path = lib
	})
	return clockShift.path, clockShift.err
}

// StartClocked is Start for a server whose wall clock a test moves with
// ShiftClock (its monotonic clock runs on): Redis expires keys and answers
// TIME on the wall clock, so a shift is a clock fault. It preloads
// clockshift.c, built with cc: without cc the test skips with a hint, or,
// with RELOCK_REQUIRE_REDIS=1, fails.
func StartClocked(t testing.TB, extra ...string) *Server {
	t.Helper()
	lib, err := clockShiftLib()
	if err != nil {
		missing(t, fmt.Sprintf("redistest: the clock shift library could not be built (install a C compiler: apt-get install gcc): %v", err))
	}
	s := &Server{t: t, path: Binary(t), Dir: t.TempDir()}
	s.clock = filepath.Join(s.Dir, "clock-shift")
	if err := os.WriteFile(s.clock, make([]byte, 16), 0o644); err != nil {
		t.Fatal(err)
	}
	s.env = []string{"LD_PRELOAD=" + lib, "RELOCK_CLOCK_FILE=" + s.clock}
	return start(t, s, nil, extra)
}

// ShiftClock sets the server's wall clock to the real one plus d (negative:
// behind), at once, for the server running and for its restarts. Only for a
// server from StartClocked.
func (s *Server) ShiftClock(d time.Duration) {
	s.t.Helper()
	if s.clock == "" {
		s.t.Fatal("redistest: ShiftClock on a server not from StartClocked")
	}
	var b [16]byte
	binary.NativeEndian.PutUint64(b[:8], uint64(d.Microseconds()))
	binary.NativeEndian.PutUint64(b[8:], uint64(d.Microseconds()))
	f, err := os.OpenFile(s.clock, os.O_WRONLY, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b[:], 0); err != nil {
		s.t.Fatal(err)
	}
}
