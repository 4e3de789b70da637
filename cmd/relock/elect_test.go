package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/relock-go/relock/scripts"
)

// terms reads the terms the commands appended to path, one per line.
func terms(t *testing.T, path string) []int64 {
	t.Helper()
	b, _ := os.ReadFile(path)
	var ts []int64
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.ParseInt(f, 10, 64)
		require.NoError(t, err)
		ts = append(ts, n)
	}
	return ts
}

// Two elects on one name lead in turn, each with a larger term; leader
// shows the one leading, and nobody after both are done. A watcher sees
// every change.
func TestElectAndLeader(t *testing.T) {
	_, relock := server(t)
	dir := t.TempDir()
	log, gate := filepath.Join(dir, "log"), filepath.Join(dir, "gate")

	watch := relock("leader", "--watch", "--json", "jobs")
	out, err := watch.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	lines := bufio.NewScanner(out)
	next := func() leaderJSON {
		t.Helper()
		require.True(t, lines.Scan(), "the watcher printed a line")
		var l leaderJSON
		require.NoError(t, json.Unmarshal(lines.Bytes(), &l), lines.Text())
		return l
	}
	assert.Equal(t, "", next().Owner, "nobody leads at first")

	// first runs until the gate file exists; second waits behind it.
	script := `echo "$RELOCK_TERM" >> "$LOG"; while [ ! -e "$GATE" ]; do sleep 0.01; done`
	first := relock("elect", "--value", "first", "jobs", "--", "sh", "-c", script)
	first.Env = append(first.Env, "LOG="+log, "GATE="+gate)
	require.NoError(t, first.Start())
	eventually(t, "first leads", func() bool { return len(terms(t, log)) == 1 })
	l := next()
	assert.Equal(t, "first", l.Value)
	assert.Equal(t, terms(t, log)[0], l.Term)

	code, stdout, stderr := result(t, relock("leader", "jobs"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "jobs: first leads in term "+strconv.FormatInt(l.Term, 10))
	// inspect and list name the election's leader beside its lock.
	code, stdout, stderr = result(t, relock("inspect", "jobs"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "election: first leads in term "+strconv.FormatInt(l.Term, 10))
	code, stdout, stderr = result(t, relock("list"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "(election: first leads in term "+strconv.FormatInt(l.Term, 10)+")")

	second := relock("elect", "--value", "second", "jobs", "--", "sh", "-c", `echo "$RELOCK_TERM" >> "$LOG"; exit 3`)
	second.Env = append(second.Env, "LOG="+log)
	require.NoError(t, second.Start())
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	require.NoError(t, first.Wait())
	var exit *exec.ExitError
	require.ErrorAs(t, second.Wait(), &exit)
	assert.Equal(t, 3, exit.ExitCode(), "elect exits with CMD's status")
	ts := terms(t, log)
	require.Len(t, ts, 2)
	assert.Greater(t, ts[1], ts[0])

	// The watcher saw first resign, second lead and resign, in term order
	// (a change it read late may be skipped, never reordered).
	for l = next(); l.Term < ts[1] || l.Owner != ""; l = next() {
		if l.Owner != "" {
			assert.Equal(t, "second", l.Value)
		}
	}
	assert.Equal(t, ts[1], l.Term)
	require.NoError(t, watch.Process.Signal(syscall.SIGINT))
	require.NoError(t, watch.Wait(), "leader --watch exits 0 when interrupted")

	code, stdout, _ = result(t, relock("leader", "jobs"))
	assert.Equal(t, 1, code)
	assert.Equal(t, "jobs: nobody leads\n", stdout)
}

// A leader whose lock is force-unlocked loses leadership: its command is
// stopped and elect exits 75; with --keep it campaigns again and runs the
// command again, in a larger term.
func TestElectLostStopsCommand(t *testing.T) {
	_, relock := server(t)
	for _, keep := range []bool{false, true} {
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		args := []string{"elect", "--watchdog", "3s", "job"}
		if keep {
			args = append(args, "--keep")
		}
		// The second run of the command (with --keep) ends at once.
		args = append(args, "--", "sh", "-c",
			`echo "$RELOCK_TERM" >> "$LOG"; [ "$(wc -l < "$LOG")" -gt 1 ] && exit 0; trap 'exit 0' TERM; while true; do sleep 0.01; done`)
		cmd := relock(args...)
		cmd.Env = append(cmd.Env, "LOG="+log)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		eventually(t, "the leader runs", func() bool { return len(terms(t, log)) == 1 })
		code, _, _ := result(t, relock("force-unlock", "--yes", "job"))
		require.Equal(t, 0, code)
		err := cmd.Wait()
		if !keep {
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 75, exit.ExitCode(), stderr.String())
			assert.Len(t, terms(t, log), 1)
			continue
		}
		require.NoError(t, err, stderr.String())
		ts := terms(t, log)
		require.Len(t, ts, 2, "--keep led again")
		assert.Greater(t, ts[1], ts[0])
	}
}

// elect and leader refuse bad usage.
func TestElectUsage(t *testing.T) {
	_, relock := server(t)
	for _, args := range [][]string{{"elect", "job"}, {"elect"}, {"leader"}, {"leader", "a", "b"}, {"elect", "--grace", "-1s", "job", "true"}} {
		code, _, stderr := result(t, relock(args...))
		assert.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

// A leader paused (SIGSTOP, with its command) past its lease is replaced
// once its hold's TTL runs out; when it resumes, its command gets SIGTERM
// (its own clock says the lease is over) and elect exits 75. The time
// from SIGCONT to SIGTERM is logged: it is the window in which a resumed
// leader's command may act before it is told, which the term fences.
func TestElectPausedLeader(t *testing.T) {
	_, relock := server(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	first := relock("elect", "--watchdog", "1s", "--grace", "5s", "job", "--", "sh", "-c",
		`trap 'date +%s%N > "$LOG.term"; exit 0' TERM; echo "$RELOCK_TERM" >> "$LOG"; while true; do sleep 0.001; done`)
	first.Env = append(first.Env, "LOG="+log)
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, first.Start())
	eventually(t, "the first leader runs", func() bool { return len(terms(t, log)) == 1 })

	require.NoError(t, syscall.Kill(-first.Process.Pid, syscall.SIGSTOP)) // relock and its command
	paused := time.Now()
	code, stdout, stderr := result(t, relock("elect", "job", "--", "sh", "-c", `echo "$RELOCK_TERM"`))
	require.Equal(t, 0, code, stderr)
	second, err := strconv.ParseInt(strings.TrimSpace(stdout), 10, 64)
	require.NoError(t, err)
	assert.Greater(t, second, terms(t, log)[0])
	t.Logf("the second leader led %v after the first was paused (watchdog timeout 1s)", time.Since(paused).Round(time.Millisecond))

	resumed := time.Now()
	require.NoError(t, syscall.Kill(-first.Process.Pid, syscall.SIGCONT))
	var exit *exec.ExitError
	require.ErrorAs(t, first.Wait(), &exit)
	assert.Equal(t, 75, exit.ExitCode())
	b, err := os.ReadFile(log + ".term")
	require.NoError(t, err, "the resumed leader's command got SIGTERM")
	at, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	require.NoError(t, err)
	t.Logf("the resumed leader's command got SIGTERM %v after SIGCONT (its shell sleeps 1ms at a time)", time.Unix(0, at).Sub(resumed).Round(time.Microsecond))
}

// A controller elected by client-go's elector on kube.NewResourceLock
// keeps a lease record, not an election record: leader, inspect and top
// read it, say it is a client-go lease, and who holds it while it is live.
// (The record is written here as the resource lock writes it, in
// client-go's JSON: the main module does not import client-go; the kube
// module's tests run the real elector.)
func TestLeaderReadsAClientGoLease(t *testing.T) {
	s, relock := server(t)
	write := func(holder string, renewed time.Time) {
		rec := fmt.Sprintf(`{"holderIdentity":%q,"leaseDurationSeconds":15,"acquireTime":%q,"renewTime":%q,"leaderTransitions":0}`,
			holder, renewed.UTC().Format(time.RFC3339), renewed.UTC().Format(time.RFC3339))
		ctx := context.Background()
		conn := scripts.Conn{Client: s.Client()}
		got, found, err := scripts.LeaseRecordGet(ctx, conn, "ctrl")
		require.NoError(t, err)
		if !found {
			_, _, err = scripts.LeaseRecordCreate(ctx, conn, "ctrl", rec, holder)
		} else {
			_, _, err = scripts.LeaseRecordUpdate(ctx, conn, "ctrl", got.Version, rec, holder, 0)
		}
		require.NoError(t, err)
	}
	write("pod-a", time.Now())
	code, stdout, stderr := result(t, relock("leader", "ctrl"))
	assert.Equal(t, 0, code, stderr)
	assert.Regexp(t, `^ctrl: client-go lease: pod-a leads in term \d+, renewed .*, lease 15s\n$`, stdout)

	code, stdout, stderr = result(t, relock("leader", "--json", "ctrl"))
	assert.Equal(t, 0, code, stderr)
	var l leaderJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &l), stdout)
	assert.True(t, l.Leading)
	assert.Equal(t, "pod-a", l.Value)
	require.NotNil(t, l.Lease)
	assert.Positive(t, l.Lease.Term)
	assert.Equal(t, 15, l.Lease.LeaseDuration)

	code, stdout, stderr = result(t, relock("inspect", "ctrl"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "client-go lease: pod-a leads in term")
	code, stdout, stderr = result(t, relock("top", "--once"))
	assert.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^ctrl +client-go-lease +1\d(\.\d)?s +- +0 +0 +pod-a×1$`, stdout, "top shows the live lease, its time left")

	write("pod-a", time.Now().Add(-time.Minute)) // not renewed for a minute
	code, stdout, _ = result(t, relock("leader", "ctrl"))
	assert.Equal(t, exitNotFound, code)
	assert.Contains(t, stdout, "nobody leads: pod-a's lease of 15s ran out")
	_, stdout, _ = result(t, relock("top", "--once"))
	assert.NotContains(t, stdout, "client-go-lease", "a lease that ran out is not held")

	write("", time.Now()) // released
	code, stdout, _ = result(t, relock("leader", "ctrl"))
	assert.Equal(t, exitNotFound, code)
	assert.Contains(t, stdout, "client-go lease: nobody leads (released")
}
