package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listCandidates runs leader --candidates --json and returns the list.
func listCandidates(t *testing.T, relock func(...string) *exec.Cmd, name string) []candidateJSON {
	t.Helper()
	code, stdout, stderr := result(t, relock("leader", "--candidates", "--json", name))
	require.Equal(t, 0, code, stderr)
	var cs []candidateJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &cs), stdout)
	return cs
}

// leaderValue returns the value of name's leader, "" for nobody.
func leaderValue(t *testing.T, relock func(...string) *exec.Cmd, name string) string {
	t.Helper()
	_, stdout, _ := result(t, relock("leader", "--json", name))
	var l leaderJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &l), stdout)
	return l.Value
}

// Three elects stand: leader --candidates lists them, the leader marked;
// --request-resign --to hands leadership to the one named, whose command
// starts while the old leader's was stopped and it exits 75; SIGTERM to
// the new leader's elect hands over to the one standing longest; with
// nobody leading a request exits 1.
func TestElectHandsOver(t *testing.T) {
	_, relock := server(t)
	code, _, stderr := result(t, relock("leader", "--request-resign", "deploys"))
	assert.Equal(t, 1, code, "nobody leads")
	assert.Contains(t, stderr, "no leader")

	dir := t.TempDir()
	ready := func(v string) string { return filepath.Join(dir, v) }
	elects := map[string]*exec.Cmd{}
	for _, v := range []string{"a", "b", "c"} {
		// The command says when it is ready for SIGTERM: its trap is set.
		cmd := relock("elect", "--value", v, "deploys", "--", "sh", "-c", `trap 'exit 0' TERM; touch "$0"; while :; do sleep 0.01; done`, ready(v))
		require.NoError(t, cmd.Start())
		elects[v] = cmd
		eventually(t, v+" stands", func() bool { return len(listCandidates(t, relock, "deploys")) == len(elects) })
	}
	cs := listCandidates(t, relock, "deploys")
	require.Len(t, cs, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{cs[0].Value, cs[1].Value, cs[2].Value})
	assert.True(t, cs[0].Leads)
	assert.False(t, cs[1].Leads || cs[2].Leads)
	code, stdout, stderr := result(t, relock("leader", "--candidates", "deploys"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "deploys: a (leads), owner "+cs[0].Owner)

	code, _, stderr = result(t, relock("leader", "--request-resign", "--to", "not-an-owner", "deploys"))
	assert.Equal(t, 1, code, "no such candidate")
	assert.Contains(t, stderr, "not a candidate")
	code, stdout, stderr = result(t, relock("leader", "--request-resign", "--json", "--to", cs[2].Owner, "deploys"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `"asked":"`+cs[0].Owner+`"`)
	eventually(t, "c leads", func() bool { return leaderValue(t, relock, "deploys") == "c" })
	err := elects["a"].Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, exitLost, exit.ExitCode(), "the leader asked to resign stopped its command")

	eventually(t, "c's command is ready", func() bool { _, err := os.Stat(ready("c")); return err == nil })
	require.NoError(t, elects["c"].Process.Signal(syscall.SIGTERM))
	begun := time.Now()
	eventually(t, "b leads", func() bool { return leaderValue(t, relock, "deploys") == "b" })
	t.Logf("b led %v after c's elect got SIGTERM", time.Since(begun).Round(time.Millisecond))
	require.NoError(t, elects["c"].Wait())
	cs = listCandidates(t, relock, "deploys")
	require.Len(t, cs, 1)
	assert.True(t, cs[0].Leads)
	eventually(t, "b's command is ready", func() bool { _, err := os.Stat(ready("b")); return err == nil })
	require.NoError(t, elects["b"].Process.Signal(syscall.SIGTERM))
	require.NoError(t, elects["b"].Wait())
	assert.Empty(t, listCandidates(t, relock, "deploys"))
	_, stdout, _ = result(t, relock("leader", "--candidates", "deploys"))
	assert.True(t, strings.HasPrefix(stdout, "deploys: no candidates"), stdout)
}
