package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// binary is the relock command built for these tests; builtAt is the
// commit it was built at, when git can tell.
var binary, builtAt string

func TestMain(m *testing.M) {
	if os.Getenv(notifierEnv) != "" {
		notifier()
		os.Exit(0)
	}
	if script := os.Getenv(notifyScriptEnv); script != "" {
		notifyScript(script)
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "relock-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "relock")
	// -buildvcs=auto: the commit is stamped when git can read it, even
	// where GOFLAGS turns that off, so that version shows it.
	if rev, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		builtAt = strings.TrimSpace(string(rev))
	}
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("building relock: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	// The cluster test's own rueidis client leaves goroutines that Close
	// does not wait for (reentrant's TestMain says which); they end by
	// themselves.
	if err := goleak.Find(
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
	); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// server starts a Redis and returns a function that makes relock
// commands pointed at it.
func server(t *testing.T) (*redistest.Server, func(args ...string) *exec.Cmd) {
	s := redistest.Start(t)
	return s, func(args ...string) *exec.Cmd {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "REDIS_ADDR="+s.Addr)
		return cmd
	}
}

// result runs cmd and returns its exit code, stdout and stderr.
func result(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String()
	}
	t.Fatalf("running %v: %v", cmd.Args, err)
	return 0, "", ""
}

// hold takes lock name from the test, as another process would.
func hold(t *testing.T, s *redistest.Server, name string) (*reentrant.Client, context.Context) {
	locks, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { locks.Close() })
	held, err := locks.Lock(name).Lock(context.Background())
	require.NoError(t, err)
	return locks, held
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	redistest.Eventually(t, 20*time.Second, what, cond)
}

// num runs a command on s and returns its integer reply.
func num(t *testing.T, s *redistest.Server, args ...string) int64 {
	t.Helper()
	n, err := s.Do(args...).AsInt64()
	require.NoError(t, err)
	return n
}

func fileHas(path, text string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), text)
}

// Two runs on one name never overlap: the second waits, subscribed, while
// the first's command runs, and runs its own after.
func TestRunExcludes(t *testing.T) {
	s, relock := server(t)
	dir := t.TempDir()
	log, gate := filepath.Join(dir, "log"), filepath.Join(dir, "gate")
	script := `echo in >> "$LOG"; while [ ! -e "$GATE" ]; do sleep 0.01; done; echo out >> "$LOG"`
	start := func() *exec.Cmd {
		cmd := relock("run", "job", "--", "sh", "-c", script)
		cmd.Env = append(cmd.Env, "LOG="+log, "GATE="+gate)
		require.NoError(t, cmd.Start())
		return cmd
	}
	first := start()
	eventually(t, "the first command runs", func() bool { return fileHas(log, "in") })
	second := start()
	eventually(t, "the second run waits on its own wake channel", func() bool {
		chans, err := s.Do("PUBSUB", "CHANNELS", "relock_wake:{job}:*").AsStrSlice()
		return err == nil && len(chans) == 1
	})
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.NoError(t, first.Wait())
	require.NoError(t, second.Wait())
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, "in\nout\nin\nout\n", string(b))
}

// -n fails at once while the lock is held, with flock's exit code 1 or
// -E's, and one line on stderr; -w gives up after its wait.
func TestRunNotAcquired(t *testing.T) {
	s, relock := server(t)
	hold(t, s, "busy")
	code, _, stderr := result(t, relock("run", "-n", "busy", "--", "true"))
	assert.Equal(t, 1, code)
	assert.Equal(t, "relock: busy is held by someone else\n", stderr)
	code, _, _ = result(t, relock("run", "-n", "-E", "9", "busy", "--", "true"))
	assert.Equal(t, 9, code)
	code, _, stderr = result(t, relock("run", "-w", "100ms", "-E", "9", "busy", "--", "true"))
	assert.Equal(t, 9, code)
	assert.Equal(t, "relock: busy is held by someone else\n", stderr)
}

// The command's exit status comes back; it sees the lock's name and owner,
// and with --fenced its token; the lock is released after.
func TestRunExitStatusAndEnv(t *testing.T) {
	s, relock := server(t)
	code, stdout, _ := result(t, relock("run", "--fenced", "job", "--", "sh", "-c", `echo "$RELOCK_NAME $RELOCK_TOKEN $RELOCK_OWNER"; exit 7`))
	assert.Equal(t, 7, code)
	fields := strings.Fields(stdout)
	require.Len(t, fields, 3)
	assert.Equal(t, "job", fields[0])
	assert.NotEqual(t, "", fields[1], "a token")
	_, err := reentrant.ParseOwner(fields[2])
	assert.NoError(t, err)
	assert.Equal(t, int64(0), num(t, s, "EXISTS", "job"), "released")

	code, _, _ = result(t, relock("run", "job", "--", "sh", "-c", "kill -KILL $$"))
	assert.Equal(t, 128+9, code, "killed by a signal: 128+n, as a shell says")
	code, _, _ = result(t, relock("run", "job", "--", "/no/such/command"))
	assert.Equal(t, 127, code)
	code, _, _ = result(t, relock("run", "job"))
	assert.Equal(t, 2, code)
}

// A force-unlock from outside: the command gets SIGTERM at the next
// renewal, and relock exits 75.
func TestRunLostLockStopsCommand(t *testing.T) {
	_, relock := server(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	cmd := relock("run", "--watchdog", "3s", "job", "--", "sh", "-c",
		`trap 'echo term >> "$LOG"; exit 0' TERM; echo in >> "$LOG"; while true; do sleep 0.01; done`)
	cmd.Env = append(cmd.Env, "LOG="+log)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	eventually(t, "the command runs", func() bool { return fileHas(log, "in") })

	code, stdout, _ := result(t, relock("force-unlock", "--yes", "job"))
	require.Equal(t, 0, code)
	assert.Equal(t, "job: unlocked; waiters told\n", stdout)
	forced := time.Now()
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 75, exit.ExitCode())
	assert.True(t, fileHas(log, "term"), "the command got SIGTERM")
	assert.Contains(t, stderr.String(), `relock: lock lost: "job" held by`)
	assert.Equal(t, 1, strings.Count(stderr.String(), "lock lost"), "the loss is reported once:\n%s", stderr.String())
	t.Logf("the command was stopped %v after the force-unlock (renewal period 1s)", time.Since(forced).Round(time.Millisecond))
}

// After its holder is SIGKILLed, the next run waiting with -w gets the
// lock when the dead holder's TTL runs out, not before.
func TestRunAfterKilledHolder(t *testing.T) {
	s, relock := server(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	holder := relock("run", "--watchdog", "2s", "job", "--", "sh", "-c", `echo in >> "$LOG"; exec sleep 60`)
	holder.Env = append(holder.Env, "LOG="+log)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, holder.Start())
	eventually(t, "the holder runs", func() bool { return fileHas(log, "in") })
	require.NoError(t, syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)) // relock and its command
	_ = holder.Wait()
	ttl := num(t, s, "PTTL", "job")
	require.Greater(t, ttl, int64(0), "the dead holder's lock is still there")

	start := time.Now()
	code, _, stderr := result(t, relock("run", "-w", "20s", "job", "--", "true"))
	assert.Equal(t, 0, code, stderr)
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(ttl-50)*time.Millisecond, "not before the TTL ran out")
}

// inspect --json says what a key is, and list finds the locks.
func TestInspectAndList(t *testing.T) {
	s, relock := server(t)
	locks, held := hold(t, s, "orders")
	owner, _ := reentrant.OwnerFrom(held)
	_, err := locks.Semaphore("pool").TrySetPermits(context.Background(), 3)
	require.NoError(t, err)

	code, stdout, _ := result(t, relock("inspect", "--json", "orders"))
	require.Equal(t, 0, code)
	var r keyReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	assert.Equal(t, "lock", r.Kind)
	require.Len(t, r.Holders, 1)
	assert.Equal(t, entry{Owner: owner.String(), Count: 1}, r.Holders[0])
	assert.Greater(t, r.TTLMillis, int64(0))

	code, stdout, _ = result(t, relock("inspect", "--json", "pool"))
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	assert.Equal(t, "semaphore-or-latch", r.Kind)
	assert.Equal(t, int64(3), *r.Count)

	code, _, _ = result(t, relock("inspect", "nothing"))
	assert.Equal(t, 1, code)

	code, stdout, _ = result(t, relock("list", "--json"))
	require.Equal(t, 0, code)
	var rs []keyReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rs))
	require.Len(t, rs, 1, "only the lock")
	assert.Equal(t, "orders", rs[0].Name)

	// force-unlock asks first, and leaves what is not a lock alone.
	cmd := relock("force-unlock", "orders")
	cmd.Stdin = strings.NewReader("n\n")
	code, _, _ = result(t, cmd)
	assert.Equal(t, 1, code)
	assert.Equal(t, int64(1), num(t, s, "EXISTS", "orders"), "not confirmed, not unlocked")
	code, _, stderr := result(t, relock("force-unlock", "--yes", "pool"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "pool is not a lock but a semaphore-or-latch (a Redis string): left alone")
	assert.Equal(t, int64(1), num(t, s, "EXISTS", "pool"))
	require.NoError(t, s.Do("SET", "plain", "text").Error())
	code, _, stderr = result(t, relock("force-unlock", "--yes", "plain"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "plain is not a lock but some other value (a Redis string): left alone")
}

// SIGINT and SIGTERM sent to relock reach the command; relock exits with
// the command's status and releases the lock.
func TestRunForwardsSignals(t *testing.T) {
	s, relock := server(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		log := filepath.Join(t.TempDir(), "log")
		cmd := relock("run", "job", "--", "sh", "-c",
			`trap 'echo got >> "$LOG"; exit 5' INT TERM; echo in >> "$LOG"; while true; do sleep 0.01; done`)
		cmd.Env = append(cmd.Env, "LOG="+log)
		require.NoError(t, cmd.Start())
		eventually(t, "the command runs", func() bool { return fileHas(log, "in") })
		require.NoError(t, cmd.Process.Signal(sig))
		var exit *exec.ExitError
		require.ErrorAs(t, cmd.Wait(), &exit)
		assert.Equal(t, 5, exit.ExitCode(), sig)
		assert.True(t, fileHas(log, "got"), sig)
		assert.Equal(t, int64(0), num(t, s, "EXISTS", "job"), "released")
	}
}

// On a cluster, run takes a lock on a seed list's cluster, and list finds
// locks on every master; behind a cluster proxy, list, inspect and run
// work; through Sentinel, run finds the master.
func TestClusterAndSentinel(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		seeds := strings.Join(cl.Addrs(), ",")
		locks, err := reentrant.New(cl.Client(), reentrant.Options{})
		require.NoError(t, err)
		defer locks.Close()
		var names []string
		for _, m := range cl.Masters() {
			name := nameOn(m)
			names = append(names, name)
			_, err := locks.Lock(name).Lock(context.Background())
			require.NoError(t, err)
		}
		assert.ElementsMatch(t, names, listed(t, "--addr", seeds), "a lock on each of the three masters")

		code, stdout, stderr := result(t, exec.Command(binary, "run", "--addr", seeds, "free", "--", "echo", "ran"))
		assert.Equal(t, 0, code, stderr)
		assert.Equal(t, "ran\n", stdout)
		code, _, _ = result(t, exec.Command(binary, "run", "-n", "--addr", seeds, names[0], "--", "true"))
		assert.Equal(t, 1, code, "held on its master")
	})
	// A cluster proxy looks like one node and refuses keys of two slots in
	// one command: list, inspect and run work there on locks in many slots.
	t.Run("cluster proxy", func(t *testing.T) {
		s := redistest.StartProxyLike(t)
		locks, err := reentrant.New(s.Client(), reentrant.Options{})
		require.NoError(t, err)
		defer locks.Close()
		held := map[string]*reentrant.Lock{
			"plain": locks.Lock("plain"), "fair": locks.FairLock("fair"),
			"read": locks.ReadWriteLock("rw").ReadLock(), "fenced": locks.FencedLock("fenced"),
			"priority": locks.PriorityLock("prio"),
		}
		var names []string
		for _, l := range held {
			_, err := l.Lock(context.Background())
			require.NoError(t, err)
			names = append(names, l.Name())
		}
		_, err = locks.PermitExpirableSemaphore("permits").TrySetPermits(context.Background(), 2)
		require.NoError(t, err)
		_, err = locks.PermitExpirableSemaphore("permits").Acquire(context.Background())
		require.NoError(t, err)

		assert.ElementsMatch(t, names, listed(t, "--addr", s.Addr))
		for _, name := range append(names, "permits") {
			code, stdout, stderr := result(t, exec.Command(binary, "inspect", "--json", "--addr", s.Addr, name))
			require.Equal(t, 0, code, "%s: %s", name, stderr)
			var r keyReport
			require.NoError(t, json.Unmarshal([]byte(stdout), &r))
			assert.NotEmpty(t, r.Holders, name)
		}
		code, stdout, stderr := result(t, exec.Command(binary, "run", "--addr", s.Addr, "free", "--", "echo", "ran"))
		assert.Equal(t, 0, code, stderr)
		assert.Equal(t, "ran\n", stdout)
		assert.NotContains(t, stderr, "CROSSSLOT")
	})
	t.Run("sentinel", func(t *testing.T) {
		r := redistest.StartReplicated(t, 1)
		s := redistest.StartSentinels(t, r.Master, 3, 1)
		code, stdout, stderr := result(t, exec.Command(binary, "run", "--addr", strings.Join(s.Addrs, ","),
			"--sentinel-master", s.Master, "job", "--", "echo", "ran"))
		assert.Equal(t, 0, code, stderr)
		assert.Equal(t, "ran\n", stdout)
	})
}

// listed runs relock list --json with the connection flags given and
// returns the names it lists.
func listed(t *testing.T, conn ...string) []string {
	t.Helper()
	code, stdout, stderr := result(t, exec.Command(binary, append([]string{"list", "--json"}, conn...)...))
	require.Equal(t, 0, code, stderr)
	var rs []keyReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rs))
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}

// nameOn returns a lock name whose slot master m serves.
func nameOn(m redistest.Node) string {
	for i := 0; ; i++ {
		name := "lock-" + strconv.Itoa(i)
		slot := int(scripts.Slot(name))
		for _, r := range m.Slots {
			if slot >= r[0] && slot <= r[1] {
				return name
			}
		}
	}
}

// Flags may follow NAME (up to run's CMD, whose own flags stay its own);
// every command's --help exits 0; the top-level help lists the commands
// and the exit codes.
func TestUsage(t *testing.T) {
	s, relock := server(t)
	code, stdout, _ := result(t, exec.Command(binary, "--help"))
	assert.Equal(t, 0, code)
	for _, want := range []string{"relock hold", "relock run", "--permits", "--tls-ca", "77"} {
		assert.Contains(t, stdout, want)
	}
	assert.Contains(t, stdout, "--redisson-config")
	for _, cmd := range []string{"run", "hold", "inspect", "list", "force-unlock"} {
		code, stdout, _ := result(t, exec.Command(binary, cmd, "--help"))
		assert.Equal(t, 0, code, cmd)
		assert.Contains(t, stdout, "-connect-timeout", "%s --help on stdout, as relock --help", cmd)
		addrHelp := regexp.MustCompile(`-addr host:port\n[^\n]*`).FindString(stdout)
		assert.Equal(t, 1, strings.Count(addrHelp, "default"), "the address's default once: %s", addrHelp)
	}
	// Usage errors exit 2, in the CLI's own words.
	for _, args := range [][]string{{"inspect", ""}, {"run", "", "--", "true"}, {"hold", ""},
		{"list", "--db", "-1"}, {"list", "--db", "99"}, {"run", "--permits", "0", "p", "--", "true"},
		{"run", "--watchdog", "-1s", "w", "--", "true"}, {"--bogus", "list"}, {"--db", "0"}, {"nosuch"}} {
		code, _, stderr := result(t, relock(args...))
		assert.Equal(t, 2, code, "%q: %s", args, stderr)
		assert.NotContains(t, stderr, "Client from New", "%q", args)
		assert.LessOrEqual(t, strings.Count(stderr, "\n"), 2, "%q: a line, not the whole usage: %s", args, stderr)
	}
	// Connection flags before the command, as after it.
	code, stdout, stderr := result(t, exec.Command(binary, "--addr", s.Addr, "--db", "0", "list"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "NAME")
	if builtAt != "" {
		_, stdout, _ = result(t, exec.Command(binary, "version"))
		assert.Contains(t, stdout, builtAt[:12], "version names the commit it was built at")
	}
	hold(t, s, "busy")
	code, _, stderr = result(t, relock("run", "busy", "-n", "--", "true"))
	assert.Equal(t, 1, code, "-n after NAME: %s", stderr)
	code, stdout, _ = result(t, relock("inspect", "busy", "--json"))
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(stdout, "{"), stdout)
	code, stdout, stderr = result(t, relock("run", "free", "sh", "-c", `echo "$0" ok`))
	assert.Equal(t, 0, code, stderr)
	assert.Equal(t, "sh ok\n", stdout, "CMD's -c is CMD's")
}

// --shared takes the read side of a read-write lock; --permits N one of N
// permits; hold holds until signalled; -v says who holds it, and when it
// is taken and released.
func TestRunModes(t *testing.T) {
	s, relock := server(t)
	locks, _ := hold(t, s, "other")
	ctx := context.Background()

	_, err := locks.ReadWriteLock("rw").ReadLock().Lock(ctx)
	require.NoError(t, err)
	code, _, stderr := result(t, relock("run", "--shared", "-n", "rw", "--", "true"))
	assert.Equal(t, 0, code, "readers share: %s", stderr)
	_, err = locks.ReadWriteLock("rw2").WriteLock().Lock(ctx)
	require.NoError(t, err)
	code, _, _ = result(t, relock("run", "--shared", "-n", "rw2", "--", "true"))
	assert.Equal(t, 1, code, "a writer holds it")

	pool := locks.PermitExpirableSemaphore("pool")
	_, err = pool.TrySetPermits(ctx, 2)
	require.NoError(t, err)
	_, err = pool.Acquire(ctx)
	require.NoError(t, err)
	code, stdout, stderr := result(t, relock("run", "--permits", "2", "-n", "pool", "--", "sh", "-c", `echo "$RELOCK_OWNER"`))
	assert.Equal(t, 0, code, "one of two permits left: %s", stderr)
	assert.Len(t, strings.TrimSpace(stdout), 32, "RELOCK_OWNER is the permit's id")
	_, err = pool.Acquire(ctx)
	require.NoError(t, err)
	code, _, _ = result(t, relock("run", "--permits", "2", "-n", "pool", "--", "true"))
	assert.Equal(t, 1, code, "both permits taken")
	code, _, _ = result(t, relock("run", "--permits", "2", "--shared", "pool", "--", "true"))
	assert.Equal(t, 2, code)

	order, err := locks.GroupLock("orders", "42").Lock(ctx)
	require.NoError(t, err)
	code, _, _ = result(t, relock("run", "--value", "41", "--value", "42", "-n", "orders", "--", "true"))
	assert.Equal(t, 1, code, "value 42 of group orders is held")
	code, _, stderr = result(t, relock("run", "--value", "43", "-n", "orders", "--", "true"))
	assert.Equal(t, 0, code, "value 43 is free: %s", stderr)
	code, stdout, _ = result(t, relock("inspect", "orders"))
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "group")
	assert.Regexp(t, `value hash \S{22}: holder \S+:\d+ \(count 1, until `, stdout, "the held value's hash, its owner, count and end")
	code, stdout, _ = result(t, relock("inspect", "orders", "--value", "42", "--value", "41"))
	assert.Equal(t, 0, code)
	assert.Regexp(t, `(?s)value "42": holder \S+:\d+ \(count 1, until .*\n  value "41": free\n$`, stdout, "the values named, in order")
	code, stdout, _ = result(t, relock("list", "orders"))
	assert.Equal(t, 0, code)
	assert.Regexp(t, `orders\s+group\s+\S+\s+#\S{22}=\S+:\d+×1`, stdout, "list shows each held value's hash")
	code, _, stderr = result(t, relock("force-unlock", "--yes", "orders"))
	assert.Equal(t, 0, code, "%s", stderr)
	assert.Equal(t, int64(0), num(t, s, "EXISTS", "orders"), "every value freed")
	assert.ErrorIs(t, locks.GroupLock("orders", "42").Unlock(order), reentrant.ErrLockLost)
	code, _, _ = result(t, relock("run", "--value", "1", "--fenced", "orders", "--", "true"))
	assert.Equal(t, 2, code)

	cmd := relock("hold", "--fenced", "held")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make([]byte, 200)
	n, err := out.Read(line)
	require.NoError(t, err)
	assert.Regexp(t, `^held held by \S+:\d+ with token \d+\n$`, string(line[:n]))
	assert.Equal(t, int64(1), num(t, s, "EXISTS", "held"))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "hold exits 0 when signalled")
	assert.Equal(t, int64(0), num(t, s, "EXISTS", "held"), "released")

	code, _, stderr = result(t, relock("run", "-v", "quiet", "--", "true"))
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "relock: quiet taken after")
	assert.Contains(t, stderr, "relock: quiet released")
	code, _, stderr = result(t, relock("run", "-v", "-w", "50ms", "other", "--", "true"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "relock: other is held by [")
}

// A wrong password, and a user without the rights relock needs, exit 77
// with their own message; REDIS_USERNAME, REDIS_URL and --db are honoured.
func TestCredentialsAndACL(t *testing.T) {
	s, relock := server(t)
	require.NoError(t, s.Do("ACL", "SETUSER", "app", "on", ">right", "~*", "&*", "+@all").Error())
	require.NoError(t, s.Do("ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-evalsha").Error())
	as := func(user, password string, args ...string) *exec.Cmd {
		cmd := relock(args...)
		cmd.Env = append(cmd.Env, "REDIS_USERNAME="+user, "REDIS_PASSWORD="+password)
		return cmd
	}
	code, _, stderr := result(t, as("app", "wrong", "list"))
	assert.Equal(t, 77, code)
	assert.Contains(t, stderr, "refused the credentials")
	code, _, stderr = result(t, as("app", "right", "run", "job", "--", "true"))
	assert.Equal(t, 0, code, stderr)
	code, _, stderr = result(t, as("noscripts", "pw", "run", "job", "--", "true"))
	assert.Equal(t, 77, code)
	assert.Contains(t, stderr, "EVALSHA")

	rdb := s.Client(func(o *rueidis.ClientOption) { o.SelectDB = 3 })
	locks, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	defer locks.Close()
	_, err = locks.Lock("in-db-3").Lock(context.Background())
	require.NoError(t, err)
	code, _, _ = result(t, relock("inspect", "--db", "3", "in-db-3"))
	assert.Equal(t, 0, code)
	code, _, _ = result(t, relock("inspect", "in-db-3"))
	assert.Equal(t, 1, code, "not in db 0")
	cmd := exec.Command(binary, "inspect", "in-db-3")
	cmd.Env = append(os.Environ(), "REDIS_URL=redis://app:right@"+s.Addr+"/3")
	code, _, stderr = result(t, cmd)
	assert.Equal(t, 0, code, stderr)

	require.NoError(t, s.Do("CONFIG", "SET", "requirepass", "server-pw").Error())
	code, _, stderr = result(t, relock("list"))
	assert.Equal(t, 77, code)
	assert.Contains(t, stderr, "asks for a password, and none was given")
	assert.NotContains(t, stderr, "NOAUTH", "in relock's words")
}

// TLS: relock reaches a TLS-only server with --tls and the test CA, with a
// client certificate too, and through a rediss:// URL. Without the CA the
// certificate is not trusted; --tls against a plain port is told the
// server does not speak TLS there.
func TestTLS(t *testing.T) {
	s, files := redistest.StartTLS(t)
	tlsRun := func(args ...string) (int, string) {
		code, _, stderr := result(t, exec.Command(binary, append([]string{"run"}, append(args, "job", "--", "true")...)...))
		return code, stderr
	}
	code, stderr := tlsRun("--addr", s.Addr, "--tls", "--tls-ca", files.CA)
	assert.Equal(t, 0, code, stderr)
	code, stderr = tlsRun("--addr", s.Addr, "--tls", "--tls-ca", files.CA, "--tls-cert", files.ClientCert, "--tls-key", files.ClientKey)
	assert.Equal(t, 0, code, stderr)
	code, stderr = tlsRun("--url", "rediss://"+s.Addr, "--tls-ca", files.CA)
	assert.Equal(t, 0, code, stderr)
	code, stderr = tlsRun("--addr", s.Addr, "--tls-ca", files.CA)
	assert.Equal(t, 0, code, "a CA implies TLS: %s", stderr)
	// A Java service's config: a rediss:// address and its watchdog
	// timeout, which the lock's TTL follows.
	yaml := filepath.Join(t.TempDir(), "redisson.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("singleServerConfig:\n  address: \"rediss://"+s.Addr+"\"\nlockWatchdogTimeout: 10000\n"), 0o600))
	code, stderr = tlsRun("--redisson-config", yaml, "--tls-ca", files.CA)
	assert.Equal(t, 0, code, "a Redisson config's rediss:// address with --tls-ca: %s", stderr)
	cmd := exec.Command(binary, "hold", "--redisson-config", yaml, "--tls-ca", files.CA, "java-job")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	_, err = out.Read(make([]byte, 200)) // "java-job held by ...": the lock is held
	require.NoError(t, err)
	ttl, err := s.Do("PTTL", "java-job").AsInt64()
	require.NoError(t, err)
	assert.True(t, ttl > 5000 && ttl <= 10000, "the config's lockWatchdogTimeout: PTTL %d", ttl)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	code, stderr = tlsRun("--addr", s.Addr, "--tls", "--tls-insecure")
	assert.Equal(t, 0, code, stderr)
	code, stderr = tlsRun("--addr", s.Addr, "--tls")
	assert.Equal(t, 69, code)
	assert.Contains(t, stderr, "certificate is not trusted")
	code, stderr = tlsRun("--addr", s.Addr, "--tls", "--tls-cert", files.ClientCert)
	assert.Equal(t, 2, code, stderr)

	plain := redistest.Start(t)
	code, stderr = tlsRun("--addr", plain.Addr, "--tls", "--tls-insecure", "--connect-timeout", "2s")
	assert.Equal(t, 69, code)
	assert.Contains(t, stderr, "does the server speak TLS there?")
}

// deadlocks lists the registered waits and the cycles among them, and
// exits 1 when there is a cycle, 0 when there is none, 69 when Redis
// cannot be reached.
func TestDeadlocks(t *testing.T) {
	s, relock := server(t)
	a, b := "6ba7b810-9dad-11d1-80b4-00c04fd430c8:1", "6ba7b811-9dad-11d1-80b4-00c04fd430c8:2"
	// As two clients leave it: a holds x and waits for y, b holds y and
	// waits for x, both past their DeadlockTimeout.
	since := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for _, cmd := range [][]string{{"HSET", "x", a, "1"}, {"HSET", "y", b, "1"},
		{"SET", "relock_wait:{" + a + "}", since + ":y"}, {"SET", "relock_wait:{" + b + "}", since + ":x"}} {
		require.NoError(t, s.Do(cmd...).Error())
	}
	code, stdout, stderr := result(t, relock("deadlocks", "--json"))
	require.Equal(t, 1, code, stderr)
	var r deadlocksReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	assert.Len(t, r.Edges, 2)
	require.Len(t, r.Cycles, 1)
	assert.Equal(t, []string{a, b}, []string{r.Cycles[0][0].Waiter, r.Cycles[0][1].Waiter})

	code, stdout, _ = result(t, relock("deadlocks"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout, "deadlock: owner "+a+` waits for lock "y" held by owner `+b+"; owner "+b+` waits for lock "x" held by owner `+a)

	// --dot: the same graph for Graphviz, the cycle's two waits in red.
	code, stdout, _ = result(t, relock("deadlocks", "--dot"))
	assert.Equal(t, 1, code)
	assert.True(t, strings.HasPrefix(stdout, "digraph waits_for {\n"), stdout)
	assert.Contains(t, stdout, `"`+a+`" -> "`+b+`" [label="waits for \"y\"\n`)
	assert.Contains(t, stdout, `"`+b+`" -> "`+a+`" [label="waits for \"x\"\n`)
	assert.Equal(t, 2, strings.Count(stdout, "color=red, fontcolor=red, penwidth=2"), stdout)

	require.NoError(t, s.Do("DEL", "relock_wait:{"+b+"}").Error())
	code, stdout, _ = result(t, relock("deadlocks", "--json"))
	assert.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	assert.Len(t, r.Edges, 1)
	assert.Empty(t, r.Cycles)
	code, stdout, _ = result(t, relock("deadlocks", "--dot"))
	assert.Equal(t, 0, code)
	assert.NotContains(t, stdout, "red", "no cycle, nothing in red")
	code, _, _ = result(t, relock("deadlocks", "--dot", "--json"))
	assert.Equal(t, 2, code)

	code, _, _ = result(t, exec.Command(binary, "deadlocks", "--addr", "127.0.0.1:1", "--connect-timeout", "1s"))
	assert.Equal(t, 69, code)
}

// --redisson-config connects where a Java service's Redisson YAML says,
// with its credentials and database; flags given add to it; a bad config
// is a usage error naming the key.
func TestRedissonConfigFlag(t *testing.T) {
	s, relock := server(t)
	require.NoError(t, s.Do("ACL", "SETUSER", "java", "on", ">from-yaml", "~*", "&*", "+@all").Error())
	dir := t.TempDir()
	file := func(name, yaml string) string {
		path := dir + "/" + name
		require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
		return path
	}
	cfg := file("redisson.yaml", "singleServerConfig:\n  address: \"redis://"+s.Addr+"\"\n  database: 5\nusername: java\npassword: from-yaml\nlockWatchdogTimeout: 20000\n")

	rdb := s.Client(func(o *rueidis.ClientOption) { o.SelectDB = 5 })
	locks, err := reentrant.New(rdb, reentrant.Options{})
	require.NoError(t, err)
	defer locks.Close()
	_, err = locks.Lock("in-db-5").Lock(context.Background())
	require.NoError(t, err)

	code, stdout, stderr := result(t, relock("inspect", "--redisson-config", cfg, "in-db-5"))
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "in-db-5")
	code, _, _ = result(t, relock("inspect", "--redisson-config", cfg, "--db", "0", "in-db-5"))
	assert.Equal(t, 1, code, "--db given: not in db 0")
	code, _, stderr = result(t, relock("run", "--redisson-config", cfg, "job", "--", "true"))
	assert.Equal(t, 0, code, stderr)

	// The config's lockWatchdogTimeout sets the lock's TTL; --watchdog,
	// when given, wins over it.
	ten := file("ten.yaml", "singleServerConfig:\n  address: \"redis://"+s.Addr+"\"\nlockWatchdogTimeout: 10000\n")
	for _, c := range []struct {
		flags    []string
		min, max int64
	}{{nil, 5000, 10000}, {[]string{"--watchdog", "12s"}, 10000, 12000}} {
		cmd := relock(append([]string{"hold", "--redisson-config", ten, "wd"}, c.flags...)...)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		line := make([]byte, 200)
		_, err = out.Read(line) // "wd held by ...": the lock is held
		require.NoError(t, err)
		ttl := num(t, s, "PTTL", "wd")
		assert.True(t, ttl > c.min && ttl <= c.max, "%v: PTTL %d, want (%d, %d]", c.flags, ttl, c.min, c.max)
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait())
	}

	bad := file("bad.yaml", "singleServerConfig:\n  address: \"redis://"+s.Addr+"\"\nlockWatchdogTimeout: soon\n")
	code, _, stderr = result(t, relock("list", "--redisson-config", bad))
	assert.Equal(t, 2, code, "usage")
	assert.Contains(t, stderr, "lockWatchdogTimeout")
	code, _, stderr = result(t, relock("list", "--redisson-config", cfg, "--url", "redis://"+s.Addr))
	assert.Equal(t, 2, code, stderr)
}
