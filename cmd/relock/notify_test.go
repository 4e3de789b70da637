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

// notifyScriptEnv makes this test binary, run as CMD, speak the notify
// protocol as a script says: steps separated by ";", each "send TEXT"
// (one datagram; "\n" in TEXT is a new line, $NOW the time in ns), "sleep
// DURATION", "log WORD" (to LOG) or "hang" (until SIGTERM, then "term" to
// LOG). It exits 6 if systemd's WATCHDOG_PID for relock reached it.
const notifyScriptEnv = "RELOCK_TEST_NOTIFY_SCRIPT"

func notifyScript(script string) {
	if _, ok := os.LookupEnv("WATCHDOG_PID"); ok {
		os.Exit(6)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	conn, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
	if err != nil {
		os.Exit(3)
	}
	for step := range strings.SplitSeq(script, ";") {
		verb, arg, _ := strings.Cut(step, " ")
		switch verb {
		case "send":
			text := strings.ReplaceAll(arg, `\n`, "\n")
			text = strings.ReplaceAll(text, "$NOW", strconv.FormatInt(time.Now().UnixNano(), 10))
			if _, err := conn.Write([]byte(text)); err != nil {
				os.Exit(4)
			}
		case "sleep":
			d, _ := time.ParseDuration(arg)
			time.Sleep(d)
		case "log":
			appendTo(os.Getenv("LOG"), arg+"\n")
		case "hang":
			<-term
			appendTo(os.Getenv("LOG"), "term\n")
		}
	}
}

// scripted runs relock CMD with --progress-within within, CMD being the
// script; it returns when LOG says "stopped", with the running command
// and a channel that receives its exit code.
type scripted struct {
	cmd     *exec.Cmd
	exited  chan int
	stderr  *fileText
	log     string
	stopped time.Time
}

func runScripted(t *testing.T, relock func(...string) *exec.Cmd, command string, within time.Duration, script string, env ...string) *scripted {
	t.Helper()
	dir := t.TempDir()
	r := &scripted{log: filepath.Join(dir, "log"), stderr: &fileText{path: filepath.Join(dir, "stderr")}, exited: make(chan int, 1)}
	r.cmd = relock(command, "--progress-within", within.String(), "job", "--", os.Args[0])
	r.cmd.Env = append(append(r.cmd.Env, "LOG="+r.log, notifyScriptEnv+"="+script), env...)
	f, err := os.Create(r.stderr.path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	r.cmd.Stderr = f
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() { _ = r.cmd.Process.Kill() })
	go func() {
		err := r.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			r.exited <- 0
		case errors.As(err, &exit):
			r.exited <- exit.ExitCode()
		default:
			r.exited <- -1
		}
	}()
	for giveUp := time.Now().Add(redistest.Within); !fileHas(r.log, "stopped"); time.Sleep(time.Millisecond) {
		select {
		case code := <-r.exited:
			t.Fatalf("relock ended (%d) before the script stopped:\n%s", code, r.stderr.String())
		default:
		}
		require.True(t, time.Now().Before(giveUp), "the script did not stop:\n%s", r.stderr.String())
	}
	r.stopped = time.Now()
	return r
}

// relock run under a notify socket of its own, as systemd gives a
// Type=notify unit with WatchdogSec=: CMD's READY=1 and STATUS= reach the
// outer socket within 50 ms of CMD sending them; each WATCHDOG=1 of CMD's,
// though not the datagram's last line, counts as progress and goes
// upstream while the lock is held, and none goes upstream once CMD stops
// reporting. Then the stall: exit 124.
func TestRelockUnderANotifySocket(t *testing.T) {
	_, relock := server(t)
	outerPath := filepath.Join(t.TempDir(), "systemd-notify")
	outer, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: outerPath, Net: "unixgram"})
	require.NoError(t, err)
	defer outer.Close()
	type datagram struct {
		text string
		at   time.Time
	}
	got := make(chan datagram, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := outer.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- datagram{string(buf[:n]), time.Now()}
		}
	}()

	const within = 1500 * time.Millisecond
	script := `send READY=1\nSTATUS=sent $NOW;sleep 50ms`
	for i := 1; i <= 4; i++ {
		script += `;send STATUS=report ` + strconv.Itoa(i) + `\nWATCHDOG=1\nX-OTHER=ignored;sleep 500ms`
	}
	script += ";log stopped;hang"
	r := runScripted(t, relock, "run", within, script,
		"NOTIFY_SOCKET="+outerPath, "WATCHDOG_USEC=30000000")
	code := redistest.Recv(t, r.exited)
	assert.Equal(t, exitStalled, code, r.stderr.String())
	assert.True(t, fileHas(r.log, "term"), "the command got SIGTERM")
	outer.Close()

	var ready *datagram
	watchdogs := 0
	for d := range got {
		if strings.Contains(d.text, "READY=1") {
			ready = &d
		}
		if strings.Contains(d.text, "WATCHDOG=1") {
			watchdogs++
			assert.Contains(t, d.text, "STATUS=report", "each upstream WATCHDOG=1 goes with a report of CMD's")
			assert.True(t, d.at.Before(r.stopped), "a WATCHDOG=1 upstream after CMD stopped reporting")
		}
		assert.NotContains(t, d.text, "X-OTHER", "only systemd's own assignments go upstream")
	}
	require.NotNil(t, ready, "READY=1 reached the outer socket")
	_, sent, _ := strings.Cut(ready.text, "STATUS=sent ")
	ns, err := strconv.ParseInt(strings.TrimSpace(sent), 10, 64)
	require.NoError(t, err, ready.text)
	assert.Less(t, ready.at.Sub(time.Unix(0, ns)), 50*time.Millisecond, "READY=1 forwarded late")
	assert.Equal(t, 4, watchdogs, "one upstream WATCHDOG=1 per report of CMD's")
}

// WATCHDOG=trigger stalls the hold at once; EXTEND_TIMEOUT_USEC keeps it
// past the deadline for one report; WATCHDOG_USEC sets a new deadline.
// CMD never sees systemd's WATCHDOG_PID for relock (which would tell it the
// watchdog is not its own).
func TestNotifyAssignments(t *testing.T) {
	_, relock := server(t)
	const within = time.Second
	t.Run("trigger", func(t *testing.T) {
		const long = 10 * time.Second
		r := runScripted(t, relock, "run", long, "send WATCHDOG=1;log stopped;send WATCHDOG=trigger;hang", "WATCHDOG_PID=1")
		assert.Equal(t, exitStalled, redistest.Recv(t, r.exited), r.stderr.String())
		assert.Less(t, time.Since(r.stopped), long/2, "stalled at the trigger, not at the deadline")
	})
	t.Run("EXTEND_TIMEOUT_USEC", func(t *testing.T) {
		r := runScripted(t, relock, "run", within, "send EXTEND_TIMEOUT_USEC=4000000;sleep 2500ms;log stopped;hang")
		assert.Equal(t, exitStalled, redistest.Recv(t, r.exited), r.stderr.String())
		// stopped is 2.5 s in, past the 1 s deadline: the extension held.
	})
	t.Run("WATCHDOG_USEC", func(t *testing.T) {
		r := runScripted(t, relock, "elect", within, "send WATCHDOG_USEC=3000000;sleep 2s;send WATCHDOG=1;sleep 2s;log stopped;hang")
		assert.Equal(t, exitStalled, redistest.Recv(t, r.exited), r.stderr.String())
		// Stopped 2 s after its last report, past the old deadline: the new
		// one held for the report after it too. Stalled 1 s later.
		assert.Less(t, time.Since(r.stopped), 5*time.Second, "the new deadline: 3 s after the last report")
	})
}
