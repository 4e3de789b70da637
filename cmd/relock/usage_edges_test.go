package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Usage errors name what the user typed: the flag, not the Go field; the
// count of names given, not "needs NAME".
func TestUsageNamesWhatWasTyped(t *testing.T) {
	_, relock := server(t)
	code, _, stderr := result(t, relock("leader", "a", "b"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "one NAME, not 2")
	for _, cmd := range []string{"run", "elect"} {
		code, _, stderr = result(t, relock(cmd, "--watchdog", "1ms", "job", "--", "true"))
		assert.Equal(t, exitUsage, code, cmd)
		assert.Contains(t, stderr, "--watchdog 1ms is below", cmd)
		assert.NotContains(t, stderr, "WatchdogTimeout", cmd)
		for _, flag := range []string{"--progress-within", "--watchdog", "--grace"} {
			code, _, stderr = result(t, relock(cmd, flag, "-1s", "job", "--", "true"))
			assert.Equal(t, exitUsage, code, cmd+" "+flag)
			assert.Contains(t, stderr, flag+" -1s: durations must not be negative", cmd)
		}
		code, _, stderr = result(t, relock(cmd, "--progress-within", "0", "job", "--", "true"))
		assert.Equal(t, exitUsage, code, cmd+": --progress-within 0 is not \"none\"")
		assert.Contains(t, stderr, "--progress-within 0s is below 1ms", cmd)
	}
	for _, flag := range []string{"--wait", "--lease"} {
		code, _, stderr = result(t, relock("run", flag, "-1s", "job", "--", "true"))
		assert.Equal(t, exitUsage, code, flag)
		assert.Contains(t, stderr, flag+" -1s: durations must not be negative")
	}
	code, _, stderr = result(t, relock("top", "--limit", "-1"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--limit -1: it must be 1 or more")
	code, _, stderr = result(t, relock("top", "--sort", "bogus"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `--sort "bogus": it takes waiting, ttl, name`)
	assert.NotContains(t, stderr, "--limit", "says what is wrong, not everything that could be")
}

// leader --watch --json says "leading": false in so many words when
// nobody leads; when Redis goes away it says it cannot see (an "error"),
// within a few seconds, rather than keep the last leader shown; and it
// sees again once Redis is back.
func TestLeaderWatchSaysWhenItCannotSee(t *testing.T) {
	s, relock := server(t)
	watch := relock("leader", "--watch", "--json", "jobs")
	out, err := watch.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(within time.Duration) map[string]any {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the watcher printed a line")
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			return m
		case <-time.After(within):
			t.Fatalf("no line within %v", within)
			return nil
		}
	}
	first := next(30 * time.Second)
	assert.Equal(t, false, first["leading"], "nobody leads, said explicitly")
	assert.NotContains(t, first, "error")
	s.Stop()
	blind := next(5 * time.Second)
	assert.Equal(t, false, blind["leading"])
	assert.NotEmpty(t, blind["error"], "it says it cannot see")
	s.Restart()
	again := next(30 * time.Second)
	assert.NotContains(t, again, "error", "it sees again")
	require.NoError(t, watch.Process.Signal(syscall.SIGINT))
}

// top into a pipe writes its frames one after another, with no
// clear-screen codes.
func TestTopIntoAPipe(t *testing.T) {
	_, relock := server(t)
	cmd := relock("top", "--interval", "20ms")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var got bytes.Buffer
	sc := bufio.NewScanner(out)
	for frames := 0; frames < 3 && sc.Scan(); {
		got.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "relock top ") {
			frames++
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	assert.Equal(t, 3, strings.Count(got.String(), "relock top "), got.String())
	assert.NotContains(t, got.String(), "\x1b[")
}
