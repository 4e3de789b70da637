package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// top shows a held lock with a client waiting on it, in a frame for
// people (--once) and as JSON.
func TestTop(t *testing.T) {
	s, relock := server(t)
	locks, held := hold(t, s, "jobs")
	waiter, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	defer waiter.Close()
	got := make(chan error, 1)
	go func() {
		h, err := waiter.Lock("jobs").Lock(context.Background())
		if err == nil {
			err = waiter.Lock("jobs").Unlock(h)
		}
		got <- err
	}()
	eventually(t, "the waiter listens", func() bool {
		n, _ := s.Do("PUBSUB", "NUMSUB", "redisson_lock__channel:{jobs}").AsIntMap()
		return n["redisson_lock__channel:{jobs}"] == 1
	})
	owner, _ := reentrant.OwnerFrom(held)

	code, stdout, stderr := result(t, relock("top", "--once"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "1 locks held, 1 clients waiting, 0 queued, 0 deadlocks")
	assert.Regexp(t, `jobs +lock +[0-9.]+s +[0-9.]+m?s ago +1 +0 +`+owner.String()+`×1`, stdout)

	code, stdout, stderr = result(t, relock("top", "--once", "--json", "jo*"))
	require.Equal(t, 0, code, stderr)
	var f topFrame
	require.NoError(t, json.Unmarshal([]byte(stdout), &f), stdout)
	require.Len(t, f.Locks, 1)
	assert.Equal(t, "jobs", f.Locks[0].Name)
	assert.Equal(t, int64(1), f.Locks[0].WaitingClients)
	assert.Equal(t, owner.String(), f.Locks[0].Holders[0].Owner)

	require.NoError(t, locks.Lock("jobs").Unlock(held))
	require.NoError(t, redistest.Recv(t, got))
	code, stdout, _ = result(t, relock("top", "--once", "--json"))
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &f))
	assert.Empty(t, f.Locks, "nothing held")
	code, _, _ = result(t, relock("top", "--sort", "size"))
	assert.Equal(t, 2, code)
}

// TestTopShowsLateRenewals: a hold whose TTL says it was renewed 20s ago,
// past half of the holders' 30s watchdog timeout, is shown late; with
// --watchdog-timeout 60s it is renewed 50s ago, and later still.
func TestTopShowsLateRenewals(t *testing.T) {
	s, relock := server(t)
	require.NoError(t, s.Do("HSET", "stale", "0ac20607-951e-842b-8270-b4672da75b5d:1", "1").Error())
	require.NoError(t, s.Do("PEXPIRE", "stale", "10000").Error()) // as if renewed 20s ago
	code, stdout, stderr := result(t, relock("top", "--once"))
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `stale +lock +[0-9.]+s +2\d(\.\d)?s ago LATE +0 +0 +0ac20607-951e-842b-8270-b4672da75b5d:1×1`, stdout)

	code, stdout, stderr = result(t, relock("top", "--once", "--json"))
	require.Equal(t, 0, code, stderr)
	var f topFrame
	require.NoError(t, json.Unmarshal([]byte(stdout), &f), stdout)
	require.Len(t, f.Locks, 1)
	require.NotNil(t, f.Locks[0].RenewedAgoMillis)
	assert.InDelta(t, 20000, *f.Locks[0].RenewedAgoMillis, 2000)
	assert.True(t, f.Locks[0].Late)

	require.NoError(t, s.Do("PEXPIRE", "stale", "29000").Error()) // renewed a second ago
	code, stdout, _ = result(t, relock("top", "--once", "--json"))
	require.Equal(t, 0, code)
	var now topFrame
	require.NoError(t, json.Unmarshal([]byte(stdout), &now), stdout)
	require.Len(t, now.Locks, 1)
	assert.False(t, now.Locks[0].Late)
	code, _, _ = result(t, relock("top", "--watchdog-timeout", "0s"))
	assert.Equal(t, 2, code)
}

// BenchmarkTopFrame measures what one frame of top costs the server with
// 1,000 and with 100,000 locks held, showing 50 (the default --limit) or
// 1,000: the commands it sends (INFO
// commandstats, before and after) and how long it takes to read. The
// locks are written as Redisson's hashes by one owner, with an hour to
// live, so that no watchdog renews them meanwhile.
//
//	go test -run '^$' -bench TopFrame -benchtime 20x ./cmd/relock
func BenchmarkTopFrame(b *testing.B) {
	for _, c := range []struct{ n, limit int }{{1000, 50}, {1000, 1000}, {100_000, 50}} {
		n := c.n
		b.Run(fmt.Sprintf("locks=%d/limit=%d", n, c.limit), func(b *testing.B) {
			s := redistest.Start(b)
			rdb := s.Client()
			locks, err := reentrant.New(rdb, reentrant.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer locks.Close()
			const owner = "0ac20607-951e-842b-8270-b4672da75b5d:1"
			for start := 0; start < n; start += 1000 {
				var cmds rueidis.Commands
				for i := start; i < min(start+1000, n); i++ {
					key := fmt.Sprintf("held-%d", i)
					cmds = append(cmds, rdb.B().Hset().Key(key).FieldValue().FieldValue(owner, "1").Build(),
						rdb.B().Pexpire().Key(key).Milliseconds(3_600_000).Build())
				}
				for _, r := range rdb.DoMulti(context.Background(), cmds...) {
					if err := r.Error(); err != nil {
						b.Fatal(err)
					}
				}
			}
			calls := func() int64 {
				var n int64
				for _, c := range s.CommandStats() {
					n += c.Calls
				}
				return n
			}
			reader := &topReader{rdb: rdb, locks: locks, limit: c.limit}
			scanning := 0
			before := calls()
			for b.Loop() {
				f, err := reader.frame(context.Background(), "*", "waiting")
				if err != nil || len(f.Locks) != c.limit {
					b.Fatalf("%d locks, %v", len(f.Locks), err)
				}
				if f.Scanning {
					scanning++
				}
			}
			// The stats' own INFO runs meanwhile: one command per frame.
			b.ReportMetric(float64(calls()-before)/float64(b.N), "commands/frame")
			b.ReportMetric(float64(scanning)/float64(b.N), "scanning/frame")
		})
	}
}

// top in a terminal (a pseudo-terminal, through script(1)) redraws its
// frame, and its keys work: s orders by TTL, / filters by a pattern
// typed, p pauses, q quits with 0.
func TestTopKeysInATerminal(t *testing.T) {
	scriptPath, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) (util-linux) is needed for a pseudo-terminal")
	}
	s, _ := server(t)
	hold(t, s, "jobs")
	hold(t, s, "reports")
	cmd := exec.Command(scriptPath, "-qfec", binary+" top --interval 100ms", "/dev/null")
	cmd.Env = append(os.Environ(), "REDIS_ADDR="+s.Addr, "TERM=dumb")
	keys, err := cmd.StdinPipe()
	require.NoError(t, err)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	shows := func(what, text string) {
		t.Helper()
		eventually(t, what, func() bool { return strings.Contains(out.since(), text) })
	}
	shows("a frame with both locks and the keys", "2 locks held")
	shows("the keys' line", "s sort (waiting)")

	out.mark()
	fmt.Fprint(keys, "s")
	shows("the order by TTL", "s sort (ttl)")

	out.mark()
	fmt.Fprint(keys, "/rep*\r")
	shows("the frame of the pattern typed", `pattern "rep*": 1 locks held`)

	out.mark()
	fmt.Fprint(keys, "p")
	shows("the pause", "PAUSED")

	fmt.Fprint(keys, "q")
	require.NoError(t, cmd.Wait())
}

// lockedBuffer collects a process's output for a test that reads it while
// it runs; since returns what came after the last mark.
type lockedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	from int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) mark() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from = l.b.Len()
}

func (l *lockedBuffer) since() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()[l.from:]
}
