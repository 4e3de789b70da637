// Package sqltest starts real database servers for tests, as redistest
// starts redis-server: PostgreSQL and MariaDB (or MySQL), each in a
// temporary directory, on a free loopback port, stopped when the test
// ends. A server that is not installed skips the test with a hint, or
// fails it where RELOCK_REQUIRE_SQL=1 (CI). It needs no driver: the DSNs
// it returns are for pgx's stdlib and go-sql-driver/mysql.
package sqltest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

// RequireEnv, set to 1, turns a missing server into a failure.
const RequireEnv = "RELOCK_REQUIRE_SQL"

// Server is one running database server.
type Server struct {
	// DSN connects as a user that may create tables, to a database of
	// its own.
	DSN  string
	Addr string
	dir  string
	cmd  *exec.Cmd
	log  string
}

// find returns the path of the first of names on PATH or in dirs.
func find(t testing.TB, hint string, names []string, dirs ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
		for _, d := range dirs {
			matches, _ := filepath.Glob(filepath.Join(d, n))
			if len(matches) > 0 {
				return matches[len(matches)-1]
			}
		}
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", hint, RequireEnv)
	}
	t.Skip(hint)
	return ""
}

// unprivileged returns the credential to run a server as when this
// process is root (PostgreSQL refuses to run as root): the postgres
// user's, else nobody's; nil when not root.
func unprivileged(t testing.TB) *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	t.Fatal("sqltest: running as root, and no postgres or nobody user to run PostgreSQL as")
	return nil
}

// run runs a setup command to its end, as cred (nil: as this process).
func run(cred *syscall.Credential, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", filepath.Base(name), err, out)
	}
	return nil
}

// start starts the server's process as cred, logging to the server's log,
// and waits until addr accepts connections and the log says ready.
func (s *Server) start(t testing.TB, cred *syscall.Credential, ready, name string, args ...string) {
	t.Helper()
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	if cred != nil {
		_ = os.Chown(s.log, int(cred.Uid), int(cred.Gid))
	}
	s.cmd = exec.Command(name, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = append(os.Environ(), "LC_ALL=C")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("sqltest: starting %s: %v", filepath.Base(name), err)
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("sqltest: %s exited at start:\n%s", filepath.Base(name), s.logTail())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
			c.Close()
			if b, _ := os.ReadFile(s.log); bytes.Contains(b, []byte(ready)) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sqltest: %s did not listen on %s within 60s:\n%s", filepath.Base(name), s.Addr, s.logTail())
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if lines := bytes.Split(b, []byte("\n")); len(lines) > 30 {
		b = bytes.Join(lines[len(lines)-30:], []byte("\n"))
	}
	return string(b)
}

// dir makes the server's directory, owned by cred's user.
func dir(t testing.TB, cred *syscall.Credential) string {
	d, err := os.MkdirTemp("", "relock-sqltest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if cred != nil {
		if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// Postgres starts a PostgreSQL server (initdb, then postgres) with fsync
// off, and returns it with a DSN for pgx's stdlib driver.
func Postgres(t testing.TB) *Server {
	t.Helper()
	const hint = "PostgreSQL is not installed; install it (Debian: apt-get install -y postgresql) to run the PostgreSQL tests"
	initdb := find(t, hint, []string{"initdb"}, "/usr/lib/postgresql/*/bin")
	postgres := filepath.Join(filepath.Dir(mustEval(t, initdb)), "postgres")
	cred := unprivileged(t)
	s := &Server{dir: dir(t, cred)}
	s.log = filepath.Join(s.dir, "server.log")
	data := filepath.Join(s.dir, "data")
	if err := run(cred, initdb, "-D", data, "-U", "relock", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.start(t, cred, "ready to accept connections", postgres, "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", s.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	s.DSN = fmt.Sprintf("postgres://relock@%s/postgres?sslmode=disable", s.Addr)
	return s
}

// MariaDB starts a MariaDB (or MySQL) server with a database "relock",
// and returns it with a DSN for go-sql-driver/mysql.
func MariaDB(t testing.TB) *Server {
	t.Helper()
	const hint = "MariaDB is not installed; install it (Debian: apt-get install -y mariadb-server) to run the MariaDB tests"
	server := find(t, hint, []string{"mariadbd", "mysqld"}, "/usr/sbin")
	install := find(t, hint, []string{"mariadb-install-db", "mysql_install_db"}, "/usr/bin")
	s := &Server{dir: dir(t, nil)}
	s.log = filepath.Join(s.dir, "server.log")
	data, tmp := filepath.Join(s.dir, "data"), filepath.Join(s.dir, "tmp")
	// A temporary directory of its own: servers set up at once in the
	// shared /tmp name their temporary tables alike, and fail.
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	args := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if err := run(nil, install, args...); err != nil {
		t.Fatalf("sqltest: %v", err)
	}
	// A database is a directory of the data directory: this makes
	// "relock" without a client.
	if err := os.Mkdir(filepath.Join(data, "relock"), 0o700); err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	serverArgs := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(s.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(s.dir, "mysqld.pid"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
		"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--max-connections=200"}
	if os.Geteuid() == 0 {
		serverArgs = append(serverArgs, "--user=root")
	}
	s.start(t, nil, "ready for connections", server, serverArgs...)
	s.DSN = fmt.Sprintf("root@tcp(%s)/relock", s.Addr)
	return s
}

func mustEval(t testing.TB, path string) string {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
