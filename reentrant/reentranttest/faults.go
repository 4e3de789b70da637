package reentranttest

import (
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
)

// Server is a redis-server of a test's own, for the faults miniredis cannot
// play: a server that stops answering, one that comes back empty, writes
// held up. It listens on a free loopback port (never 6379) and is killed
// when the test ends. Without redis-server installed, StartServer skips the
// test with a hint (and fails it where RELOCK_REQUIRE_REDIS=1 is set, as
// in CI).
type Server struct {
	s *redistest.Server
	t testing.TB
}

// StartServer starts a Server for t.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return &Server{s: redistest.Start(t), t: t}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.s.Addr }

// Rueidis returns a rueidis client of the server, closed when the test
// ends: give it to reentrant.New, once for each process the test plays.
func (s *Server) Rueidis() rueidis.Client { return s.s.Client() }

// Pause freezes the server (SIGSTOP): connections stay open and nothing is
// answered, as when a server or its network hangs, until Resume. Holds of
// a Client go unrenewed: each is told late (Hooks.RenewalLate) at half of
// WatchdogTimeout, and lost at 0.9 of it. The test's end resumes it.
func (s *Server) Pause() { s.s.Pause() }

// Resume undoes Pause.
func (s *Server) Resume() { s.s.Resume() }

// RestartEmpty kills the server and starts it again with no data on the
// same port, as a crash without persistence would: every lock is gone
// without a release, and the Clients reconnect. A hold's next renewal
// finds it gone, and its held context ends with reentrant.ErrLockLost.
func (s *Server) RestartEmpty() { s.s.RestartEmpty() }

// Vanish deletes the keys of the lock called name (a lock's or a fenced
// lock's hash; a semaphore's or a latch's key), as their expiry would:
// no release message, nothing told. The holder's watchdog finds the hold
// gone at its next renewal, a third of WatchdogTimeout at most.
func (s *Server) Vanish(name string) {
	s.t.Helper()
	if err := s.s.Do("DEL", name).Error(); err != nil {
		s.t.Fatalf("reentranttest: vanish %q: %v", name, err)
	}
}

// HoldWrites holds up every write, scripts included, for d (CLIENT PAUSE
// WRITE): renewals, acquires and releases wait, then run; reads go on. A
// d past half of a Client's WatchdogTimeout makes its holds late, one past
// 0.9 of it loses them.
func (s *Server) HoldWrites(d time.Duration) {
	s.t.Helper()
	ms := strconv.FormatInt(max(d.Milliseconds(), 1), 10)
	if err := s.s.Do("CLIENT", "PAUSE", ms, "WRITE").Error(); err != nil {
		s.t.Fatalf("reentranttest: hold writes: %v", err)
	}
}

// Vanish deletes the key of the lock called name on the embedded server m,
// as its expiry would: no release message. The holder's watchdog finds the
// hold gone at its next renewal (in a testing/synctest bubble, as soon as
// the fake clock passes a third of WatchdogTimeout).
func Vanish(m *miniredis.Miniredis, name string) { m.Del(name) }

// Empty drops every key of the embedded server m, as a server restarted
// without its data would: every hold's next renewal finds it gone.
func Empty(m *miniredis.Miniredis) { m.FlushAll() }
