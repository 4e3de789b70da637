package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// events fails, naming the flags, on a server without keyspace
// notifications; with --enable-notifications it turns them on and prints
// each event as a JSON line: a holder that acquires and releases, a key
// deleted at a shell; SIGINT ends it with 0.
func TestEvents(t *testing.T) {
	s, relock := server(t)
	code, _, stderr := result(t, relock("events", "job"))
	assert.Equal(t, exitConfig, code, "the server is not set up for it")
	assert.Contains(t, stderr, "notify-keyspace-events")
	assert.Contains(t, stderr, "--enable-notifications", "the CLI's flag, not the Go option")
	assert.NotContains(t, stderr, "EnableNotifications")

	cmd := relock("events", "--json", "--enable-notifications", "job")
	next := watching(t, cmd)

	locks, held := hold(t, s, "job")
	owner, _ := reentrant.OwnerFrom(held)
	ev := next()
	assert.Equal(t, "acquired", ev.Kind)
	require.Len(t, ev.Holders, 1)
	assert.Equal(t, owner.String(), ev.Holders[0].Owner)
	require.NoError(t, locks.Lock("job").Unlock(held))
	ev = next()
	assert.Equal(t, "released", ev.Kind)

	held, err := locks.Lock("job").Lock(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "acquired", next().Kind)
	s.Do("DEL", "job")
	ev = next()
	assert.Equal(t, "deleted", ev.Kind)
	require.Len(t, ev.Holders, 1)
	o, _ := reentrant.OwnerFrom(held)
	assert.True(t, strings.HasPrefix(ev.Holders[0].Owner, o.String()))

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait())
}

// A holder whose process stops (SIGSTOP) keeps no lease: events tells the
// expiry, naming it, once its watchdog timeout has run out.
func TestEventsStoppedHolderExpires(t *testing.T) {
	s, relock := server(t)
	s.Do("CONFIG", "SET", "notify-keyspace-events", "KEA")
	next := watching(t, relock("events", "--json", "job"))

	holder := relock("hold", "--watchdog", "1s", "job")
	holderOut, err := holder.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, holder.Start())
	defer holder.Process.Kill()
	held := bufio.NewScanner(holderOut)
	require.True(t, held.Scan(), "hold says it holds")
	owner := strings.Fields(held.Text())[3] // "job held by OWNER"
	ev := next()
	require.Equal(t, "acquired", ev.Kind)
	require.Len(t, ev.Holders, 1)
	assert.Equal(t, owner, ev.Holders[0].Owner)

	require.NoError(t, holder.Process.Signal(syscall.SIGSTOP))
	ev = next()
	assert.Equal(t, "expired", ev.Kind)
	require.Len(t, ev.Holders, 1)
	assert.Equal(t, owner, ev.Holders[0].Owner)
	require.NoError(t, holder.Process.Signal(syscall.SIGCONT))
}

// watching starts cmd, a relock events --json, and returns once it
// watches (its line on stderr): next reads its next event, failing the
// test when there is none. The process is killed when the test ends, if
// the test has not waited for it.
func watching(t *testing.T, cmd *exec.Cmd) (next func() eventJSON) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	errLines := bufio.NewScanner(stderr)
	require.True(t, errLines.Scan(), "a line on stderr once it watches")
	require.Contains(t, errLines.Text(), "watching")
	go func() {
		for errLines.Scan() {
		}
	}()
	lines := bufio.NewScanner(stdout)
	return func() eventJSON {
		t.Helper()
		require.True(t, lines.Scan(), "an event line")
		var ev eventJSON
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev), lines.Text())
		return ev
	}
}

// events --db N hears the locks of database N, where its keyspace
// notifications are published: not database 0's channel.
func TestEventsOnANonZeroDatabase(t *testing.T) {
	s, relock := server(t)
	s.Do("CONFIG", "SET", "notify-keyspace-events", "KEA")
	cmd := relock("events", "--json", "--db", "3", "job")
	next := watching(t, cmd)
	locks, err := reentrant.New(s.Client(func(o *rueidis.ClientOption) { o.SelectDB = 3 }), reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close() })
	held, err := locks.Lock("job").Lock(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "acquired", next().Kind)
	require.NoError(t, locks.Lock("job").Unlock(held))
	assert.Equal(t, "released", next().Kind)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait())
}
