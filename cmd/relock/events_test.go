package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

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
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "notify-keyspace-events")

	cmd := relock("events", "--json", "--enable-notifications", "job")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderrPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	errLines := bufio.NewScanner(stderrPipe)
	require.True(t, errLines.Scan(), "a line on stderr once it watches")
	require.Contains(t, errLines.Text(), "watching")
	go func() {
		for errLines.Scan() {
		}
	}()
	lines := bufio.NewScanner(stdout)
	next := func() eventJSON {
		t.Helper()
		require.True(t, lines.Scan(), "an event line")
		var ev eventJSON
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev), lines.Text())
		return ev
	}

	locks, held := hold(t, s, "job")
	owner, _ := reentrant.OwnerFrom(held)
	ev := next()
	assert.Equal(t, "acquired", ev.Kind)
	require.Len(t, ev.Holders, 1)
	assert.Equal(t, owner.String(), ev.Holders[0].Owner)
	require.NoError(t, locks.Lock("job").Unlock(held))
	ev = next()
	assert.Equal(t, "released", ev.Kind)

	held, err = locks.Lock("job").Lock(t.Context())
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
	watch := relock("events", "--json", "job")
	stdout, err := watch.StdoutPipe()
	require.NoError(t, err)
	stderr, err := watch.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	defer watch.Process.Kill()
	errLines := bufio.NewScanner(stderr)
	require.True(t, errLines.Scan(), "a line on stderr once it watches")
	lines := bufio.NewScanner(stdout)
	next := func() eventJSON {
		t.Helper()
		require.True(t, lines.Scan(), "an event line")
		var ev eventJSON
		require.NoError(t, json.Unmarshal(lines.Bytes(), &ev), lines.Text())
		return ev
	}

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
