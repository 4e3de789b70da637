package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// notifierEnv makes this test binary, run as CMD, a program that reports
// progress with the notify protocol itself, as go-systemd's
// daemon.SdNotify does (see notifier).
const notifierEnv = "RELOCK_TEST_NOTIFIER"

// notifier sends WATCHDOG=1 to NOTIFY_SOCKET every half of WATCHDOG_USEC,
// REPORTS times, writes "stopped" to LOG, and then hangs until SIGTERM,
// which it writes to LOG too.
func notifier() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	usec, _ := strconv.Atoi(os.Getenv("WATCHDOG_USEC"))
	reports, _ := strconv.Atoi(os.Getenv("REPORTS"))
	conn, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		os.Exit(3)
	}
	for range reports {
		if _, err := conn.Write([]byte("WATCHDOG=1")); err != nil {
			os.Exit(4)
		}
		time.Sleep(time.Duration(usec) * time.Microsecond / 2)
	}
	appendTo(os.Getenv("LOG"), "stopped\n")
	<-term
	appendTo(os.Getenv("LOG"), "term\n")
}

// fileText reads a file the way a bytes.Buffer is read, for a command's
// output written to it.
type fileText struct{ path string }

func (f *fileText) String() string {
	b, _ := os.ReadFile(f.path)
	return string(b)
}

func appendTo(path, s string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		f.WriteString(s)
		f.Close()
	}
}

// run and elect --progress-within: a command that reports progress keeps
// the lock (leadership) for many deadlines; once it stops reporting it
// gets SIGTERM within the deadline and a round trip, relock exits 124 and
// the lock is free (nobody leads). The command reports with
// systemd-notify where it is installed, and with the protocol itself (a
// Go program) always.
func TestRunProgressWithin(t *testing.T) {
	// Long enough for a test binary built with -race to start and report
	// on a busy machine: the deadline runs from when the lock is taken.
	const within = 1500 * time.Millisecond
	reporters := map[string][]string{"go": {os.Args[0]}}
	if _, err := exec.LookPath("systemd-notify"); err == nil {
		reporters["systemd-notify"] = []string{"sh", "-c", `trap 'echo term >> "$LOG"; exit 0' TERM
for i in $(seq "$REPORTS"); do systemd-notify WATCHDOG=1 || exit 5; sleep 0.75; done
echo stopped >> "$LOG"
while true; do sleep 0.01; done`}
	} else {
		t.Log("systemd-notify is not installed: only the Go reporter runs")
	}
	type runCase struct {
		command string
		argv    []string
	}
	cases := map[string]runCase{"elect/go": {"elect", reporters["go"]}}
	for name, argv := range reporters {
		cases["run/"+name] = runCase{"run", argv}
	}
	for name, rc := range cases {
		t.Run(name, func(t *testing.T) {
			argv := rc.argv
			_, relock := server(t)
			log := filepath.Join(t.TempDir(), "log")
			cmd := relock(append([]string{rc.command, "--progress-within", within.String(), "job", "--"}, argv...)...)
			cmd.Env = append(cmd.Env, "LOG="+log, "REPORTS=4", notifierEnv+"=1")
			stderr := &fileText{path: filepath.Join(t.TempDir(), "stderr")}
			f, err := os.Create(stderr.path)
			require.NoError(t, err)
			defer f.Close()
			cmd.Stderr = f
			start := time.Now()
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			for giveUp := time.Now().Add(redistest.Within); !fileHas(log, "stopped"); {
				select {
				case err = <-exited:
					t.Fatalf("relock ended (%v) before the command stopped reporting:\n%s", err, stderr.String())
				case <-time.After(time.Millisecond):
				}
				require.True(t, time.Now().Before(giveUp), "the command did not stop reporting:\n%s", stderr.String())
			}
			stopped := time.Now()
			assert.Greater(t, stopped.Sub(start), 3*within/2, "four reports at half the deadline kept the lock for more than one and a half deadlines")
			err = redistest.Recv(t, exited)
			ended := time.Since(stopped)
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "relock: %v\n%s", err, stderr.String())
			assert.Equal(t, exitStalled, exit.ExitCode(), stderr.String())
			assert.True(t, fileHas(log, "term"), "the command got SIGTERM")
			assert.Less(t, ended, within+1500*time.Millisecond, "stopped later than the deadline and a round trip")
			// One line for the stall, naming what was given up.
			assert.Equal(t, 1, strings.Count(stderr.String(), "no progress"), stderr.String())
			assert.NotContains(t, stderr.String(), "level=WARN", stderr.String())
			if rc.command == "elect" {
				assert.Contains(t, stderr.String(), `relock: election "job": no progress from the command within 1.5s: leadership given up`)
			} else {
				assert.Contains(t, stderr.String(), `relock: lock "job": no progress from the command within 1.5s: the lock given back`)
			}
			check := relock("run", "-n", "job", "--", "true")
			if rc.command == "elect" {
				check = relock("leader", "job") // 1: nobody leads
			}
			code, _, errOut := result(t, check)
			assert.Equal(t, map[string]int{"run": 0, "elect": 1}[rc.command], code, "the stalled command's lock was given back: %s", errOut)
		})
	}
}
