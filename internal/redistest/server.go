package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// RequireEnv names the environment variable that turns a missing
// redis-server from a skip into a failure.
const RequireEnv = "RELOCK_REQUIRE_REDIS"

// ServerEnv names the environment variable that picks the server binary,
// by name on PATH or by path: redis-server when unset, valkey-server to run
// the same tests on Valkey.
const ServerEnv = "RELOCK_REDIS_SERVER"

const installHint = "%s is not on PATH; install it (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis) to run the real-Redis tests"

// Binary returns the path of the server binary (redis-server, or what
// RELOCK_REDIS_SERVER names), or skips the test (fails it when
// RELOCK_REQUIRE_REDIS=1) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	name := os.Getenv(ServerEnv)
	if name == "" {
		name = "redis-server"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, fmt.Sprintf(installHint, name))
	}
	return path
}

// missing skips the test with hint, or fails it when RELOCK_REQUIRE_REDIS=1:
// what a test does when something a real-server test needs is absent.
func missing(t testing.TB, hint string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", hint, RequireEnv)
	}
	t.Skip(hint)
}

// Server is one redis-server process owned by a test.
type Server struct {
	// Addr is host:port on loopback.
	Addr string
	// Dir is the server's own working directory (its log is Dir/redis.log).
	Dir string

	t    testing.TB
	path string
	args []string

	// tls, for a server from StartTLS, is how its clients connect.
	tls *tls.Config
	// env, for a server from StartClocked, preloads its clock's shift.
	env   []string
	clock string // the shift's file (see ShiftClock)

	mu    sync.Mutex
	cmd   *exec.Cmd
	exit  chan struct{} // closed when the current process has exited
	admin rueidis.Client
}

// Start runs a redis-server on a free loopback port, waits until it answers
// PING, and arranges for it to be killed when the test ends. extra are more
// redis-server arguments, such as "--appendonly", "yes".
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, &Server{t: t, path: Binary(t), Dir: t.TempDir()}, nil, extra)
}

// start starts s, listening on a free port: plain TCP, or only TLS when
// tlsArgs (the server's TLS settings) are given.
func start(t testing.TB, s *Server, tlsArgs []string, extra []string) *Server {
	t.Helper()
	t.Cleanup(s.cleanup)
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var port int
		if port, err = FreePort(); err != nil {
			continue
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		listen := []string{"--port", strconv.Itoa(port)}
		if tlsArgs != nil {
			listen = append([]string{"--port", "0", "--tls-port", strconv.Itoa(port)}, tlsArgs...)
		}
		s.args = append(append(listen,
			"--bind", "127.0.0.1",
			"--dir", s.Dir,
			"--logfile", filepath.Join(s.Dir, "redis.log"),
			"--save", "",
			"--appendonly", "no",
			"--daemonize", "no",
			"--enable-debug-command", "local",
		), extra...)
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("redistest: could not start redis-server: %v\n%s", err, s.logTail())
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// procAttr puts a server in its own process group, so signals to the test
// do not reach it, and kills it if the test binary dies before its cleanup.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func (s *Server) start() error {
	// The admin connection belonged to the process before: Do dials anew.
	s.mu.Lock()
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
	s.mu.Unlock()
	cmd := exec.Command(s.path, s.args...)
	cmd.Dir = s.Dir
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	// Own process group, so signals to the test do not reach it; killed if
	// the test binary dies before its cleanup runs.
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() { cmd.Wait(); close(exit) }()
	s.mu.Lock()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()

	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := ping(s.Addr, s.tls, cmd.Process.Pid); err == nil {
			return nil
		}
		select {
		case <-exit:
			return fmt.Errorf("redis-server exited at start (port taken?)")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.signal(syscall.SIGKILL)
			<-exit
			return errors.New("redis-server did not answer PING within 15s")
		}
	}
}

// ping asks the server at addr, over TLS when cfg is set and with no
// client library, for its process id, and fails unless it is pid: another
// test process may have started its own server on the port this one
// probed free, and that one must not be taken for ours. It fails too while
// the server is loading its data (PING answers LOADING, as every command
// but a few such as INFO does): a restarted server serves once loaded, and
// a test (a fault's span in internal/chaos) must not take it for served
// before.
func ping(addr string, cfg *tls.Config, pid int) error {
	var conn net.Conn
	var err error
	if cfg != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	} else {
		conn, err = net.DialTimeout("tcp", addr, time.Second)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("INFO server\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(head, "$") {
		return fmt.Errorf("INFO answered %q", head)
	}
	size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return fmt.Errorf("INFO answered %q", head)
	}
	body := make([]byte, size+2) // and its CRLF
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	want := fmt.Sprintf("process_id:%d\r\n", pid)
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("the server on %s is not ours (pid %d)", addr, pid)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	if pong, err := r.ReadString('\n'); err != nil || pong != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q (%v)", pong, err)
	}
	return nil
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(sig)
	}
}

func (s *Server) wait() {
	s.mu.Lock()
	exit := s.exit
	s.mu.Unlock()
	if exit != nil {
		<-exit
	}
}

// Stop shuts the server down with SIGTERM and waits for it to exit.
func (s *Server) Stop() {
	s.signal(syscall.SIGCONT)
	s.signal(syscall.SIGTERM)
	s.wait()
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL)
	s.wait()
}

// Pause freezes the server with SIGSTOP: connections stay open and nothing is
// answered until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Restart starts the server again on the same port and directory after Stop
// or Kill (it stops it first if it still runs). Without persistence the data
// is gone, as after a real crash.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v\n%s", err, s.logTail())
	}
}

// RestartEmpty kills the server, deletes its persistence files and starts
// it again: a server that lost its data, as after a crash without
// persistence or with its disk replaced.
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.Kill()
	for _, name := range []string{"appendonlydir", "dump.rdb"} {
		os.RemoveAll(filepath.Join(s.Dir, name))
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart: %v\n%s", err, s.logTail())
	}
}

func (s *Server) cleanup() {
	s.signal(syscall.SIGCONT)
	s.Kill()
	s.mu.Lock()
	if s.admin != nil {
		s.admin.Close()
	}
	s.mu.Unlock()
	if s.t.Failed() {
		s.t.Logf("redis-server %s log tail:\n%s", s.Addr, s.logTail())
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Client returns a rueidis client for the server, closed when the test ends.
// opt may adjust the options before the client is made.
func (s *Server) Client(opt ...func(*rueidis.ClientOption)) rueidis.Client {
	s.t.Helper()
	o := rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true, TLSConfig: s.tls}
	for _, f := range opt {
		f(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		s.t.Fatalf("redistest: client for %s: %v", s.Addr, err)
	}
	s.t.Cleanup(c.Close)
	return c
}

// Do runs one command on this server (never another node of its cluster)
// through the test's own admin connection and returns its reply: the test's way to look at or change
// Redis behind relock's back.
func (s *Server) Do(args ...string) rueidis.RedisResult {
	s.t.Helper()
	s.mu.Lock()
	if s.admin == nil {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true, DisableRetry: true, ForceSingleClient: true, TLSConfig: s.tls})
		if err != nil {
			s.mu.Unlock()
			return rueidis.NewErrorResult(err)
		}
		s.admin = c
	}
	admin := s.admin
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return admin.Do(ctx, admin.B().Arbitrary(args...).Build())
}

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	Calls int64
	Usec  int64 // the time the server spent in them
}

// CommandStats returns INFO commandstats by command name, in lower case as
// the server reports it ("evalsha", "hgetall"), since the server started
// or since CONFIG RESETSTAT; the commands scripts run are counted too. It
// is the one reader of those figures for the tests and benchmarks.
func (s *Server) CommandStats() map[string]CommandStat {
	s.t.Helper()
	info, err := s.Do("INFO", "commandstats").ToString()
	if err != nil {
		s.t.Fatalf("redistest: INFO commandstats: %v", err)
	}
	stats := map[string]CommandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isStat := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isStat {
			continue
		}
		var st CommandStat
		for _, field := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		stats[name] = st
	}
	return stats
}

// ScriptCalls returns how many script calls (EVALSHA and EVAL) the server
// has run since it started or since CONFIG RESETSTAT: a way to count a
// client's attempts.
func (s *Server) ScriptCalls() int64 {
	s.t.Helper()
	stats := s.CommandStats()
	return stats["evalsha"].Calls + stats["eval"].Calls
}
