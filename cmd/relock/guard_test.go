package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A relock run or elect killed with SIGKILL takes its command with it:
// the shell and the sleep it started in the background are gone within
// 100 ms, before the lock can pass on; a second run -n finds the lock
// still held then (its TTL is the dead relock's), and gets it after.
func TestKilledRelockTakesItsCommand(t *testing.T) {
	for _, kind := range []string{"run", "elect"} {
		t.Run(kind, func(t *testing.T) {
			_, relock := server(t)
			pids := filepath.Join(t.TempDir(), "pids")
			cmd := relock(kind, "--watchdog", "2s", "job", "--", "sh", "-c", `echo $$ > "$PIDS"; sleep 30 & echo $! >> "$PIDS"; wait`)
			cmd.Env = append(cmd.Env, "PIDS="+pids)
			require.NoError(t, cmd.Start())
			var procs []int
			eventually(t, "the command and its sleep run", func() bool {
				procs = pidsIn(pids)
				return len(procs) == 2
			})
			require.NoError(t, cmd.Process.Kill())
			killed := time.Now()
			_ = cmd.Wait()
			for anyAlive(procs) && time.Since(killed) < 10*time.Second {
				time.Sleep(time.Millisecond)
			}
			took := time.Since(killed)
			t.Logf("the command's processes were gone %v after relock was killed", took.Round(100*time.Microsecond))
			require.False(t, anyAlive(procs), "the command outlived relock")
			assert.Less(t, took, 100*time.Millisecond)

			code, _, stderr := result(t, relock("run", "-n", "job", "--", "true"))
			assert.Equal(t, 1, code, "the dead relock's lock is held until its TTL ends: %s", stderr)
			code, _, stderr = result(t, relock("run", "-w", "20s", "job", "--", "true"))
			assert.Equal(t, 0, code, stderr)
		})
	}
}

func pidsIn(path string) []int {
	b, _ := os.ReadFile(path)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// anyAlive reports whether any of pids is a live process (a zombie is
// dead: it runs nothing).
func anyAlive(pids []int) bool {
	for _, p := range pids {
		if syscall.Kill(p, 0) != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(stat[i+1:])), "Z") {
			return true
		}
	}
	return false
}

// A command that daemonises (a grandchild in a session of its own, its
// parent gone, as a double fork leaves it) does not outlive a relock
// killed with SIGKILL: the guard is its subreaper, so it is the guard's
// to end, where a kill of CMD's process group would miss it. And the
// notify socket's directory of a relock run --progress-within goes with
// relock: the guard removes it.
func TestKilledRelockTakesItsDaemons(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) is not installed (util-linux)")
	}
	_, relock := server(t)
	tmp, pids := t.TempDir(), filepath.Join(t.TempDir(), "pids")
	cmd := relock("run", "--progress-within", "30s", "job", "--", "sh", "-c",
		`echo $$ > "$PIDS"; setsid sh -c 'sleep 30 & echo $! >> "$PIDS"' </dev/null >/dev/null 2>&1; while :; do sleep 0.05; done`)
	cmd.Env = append(cmd.Env, "PIDS="+pids, "TMPDIR="+tmp)
	require.NoError(t, cmd.Start())
	var procs []int
	eventually(t, "the command and its daemon run", func() bool {
		procs = pidsIn(pids)
		return len(procs) == 2
	})
	sid := func(pid int) uintptr {
		s, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
		require.Zero(t, errno)
		return s
	}
	require.NotEqual(t, sid(procs[0]), sid(procs[1]), "the daemon is in a session of its own")
	notifyDirs, _ := filepath.Glob(filepath.Join(tmp, "relock-notify-*"))
	require.Len(t, notifyDirs, 1, "relock's notify socket is in TMPDIR")

	require.NoError(t, cmd.Process.Kill())
	killed := time.Now()
	_ = cmd.Wait()
	for anyAlive(procs) && time.Since(killed) < 10*time.Second {
		time.Sleep(time.Millisecond)
	}
	require.False(t, anyAlive(procs), "the daemon outlived relock")
	assert.Less(t, time.Since(killed), 100*time.Millisecond)
	eventually(t, "the notify directory removed", func() bool {
		left, _ := filepath.Glob(filepath.Join(tmp, "relock-notify-*"))
		return len(left) == 0
	})
}
