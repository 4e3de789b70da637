package main

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// The users docs/deployment.md gives, through the CLI: the one for locks
// and elections runs elect and leader with nothing refused; the one for
// lock events watches; a user with the locks' line alone is told by
// leader and events, exit 77, naming what it lacks.
func TestDocumentedACLUserInTheCLI(t *testing.T) {
	s, relock := server(t)
	require.NoError(t, s.Do("CONFIG", "SET", "notify-keyspace-events", "KEA").Error())
	locks := redistest.DocumentedACL(t, "locks")
	user := func(name string, rules ...[]string) {
		args := []string{"ACL", "SETUSER", name, "reset", "on", ">pw"}
		for _, r := range rules {
			args = append(args, r...)
		}
		require.NoError(t, s.Do(args...).Error())
	}
	user("elector", locks, redistest.DocumentedACL(t, "elections"))
	user("watcher", locks, redistest.DocumentedACL(t, "lock events (package"))
	user("locksonly", locks)
	as := func(name string, args ...string) *exec.Cmd {
		cmd := relock(args...)
		cmd.Env = append(cmd.Env, "REDIS_USERNAME="+name, "REDIS_PASSWORD=pw")
		return cmd
	}

	code, stdout, stderr := result(t, as("elector", "elect", "jobs", "--", "sh", "-c", `echo "$RELOCK_TERM"`))
	assert.Equal(t, 0, code, stderr)
	assert.NotEmpty(t, stdout)
	assert.Empty(t, stderr, "nothing refused, no failed resign")
	code, stdout, stderr = result(t, as("elector", "leader", "jobs"))
	assert.Equal(t, exitNotFound, code, stderr)
	assert.Equal(t, "jobs: nobody leads\n", stdout)

	// Refused as it campaigns, before CMD runs, and the lock given back:
	// not told at the Resign, after CMD ran as leader.
	code, stdout, stderr = result(t, as("locksonly", "elect", "jobs", "--", "echo", "ran"))
	assert.Equal(t, exitNoPerm, code, stderr)
	assert.Empty(t, stdout, "CMD did not run")
	assert.Contains(t, stderr, "+hmget")
	assert.NotContains(t, stderr, "resigning")
	n, err := s.Do("EXISTS", "jobs").AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the lock was given back")

	code, _, stderr = result(t, as("locksonly", "leader", "jobs"))
	assert.Equal(t, exitNoPerm, code)
	assert.Contains(t, stderr, "+hmget")
	assert.NotContains(t, stderr, "@user_script")

	next := watching(t, as("watcher", "events", "--json", "job"))
	hold(t, s, "job")
	assert.Equal(t, "acquired", next().Kind)
	code, _, stderr = result(t, as("locksonly", "events", "job"))
	assert.Equal(t, exitNoPerm, code)
	assert.Contains(t, stderr, "+config|get")
}
