package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/reentrant"
)

// exitStalled is run's and elect's exit code when CMD went
// --progress-within without reporting progress, as timeout(1)'s when its
// command timed out.
const exitStalled = 124

// notifySocket is where CMD reports progress, with systemd's notify
// protocol (sd_notify(3)), so that programs that support a systemd
// watchdog work unchanged: relock gives CMD NOTIFY_SOCKET, a datagram
// socket of its own, and WATCHDOG_USEC, the deadline. A datagram holds
// assignments, one per line, in any order:
//
//   - WATCHDOG=1 is progress; WATCHDOG=trigger stalls the hold at once;
//     WATCHDOG_USEC=N makes N µs the deadline from then on, and
//     EXTEND_TIMEOUT_USEC=N the deadline of the next report only.
//   - READY=1, STATUS=..., STOPPING=1, RELOADING=1 and MONOTONIC_USEC=...
//     go on to relock's own NOTIFY_SOCKET, when systemd gave relock one
//     (a Type=notify unit): the unit is ready when CMD is.
//   - When relock's unit has a watchdog (WatchdogSec=, so WATCHDOG_USEC
//     is set for relock), a WATCHDOG=1 of CMD's goes on too, while the
//     lock is held: systemd hears from relock only while CMD reports and
//     the lock is kept.
//
// Anything else is read and ignored.
type notifySocket struct {
	conn     *net.UnixConn
	dir      string
	within   time.Duration // the deadline, until CMD sets another
	upstream string        // relock's own NOTIFY_SOCKET; "": none
	watchdog bool          // relock's unit has a watchdog
}

// listenNotify makes the socket, in a directory of its own that close
// removes, for a deadline of within.
func listenNotify(within time.Duration) (*notifySocket, error) {
	dir, err := os.MkdirTemp("", "relock-notify-")
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &notifySocket{conn: conn, dir: dir, within: within, upstream: os.Getenv("NOTIFY_SOCKET")}
	pid := os.Getenv("WATCHDOG_PID")
	s.watchdog = s.upstream != "" && os.Getenv("WATCHDOG_USEC") != "" && (pid == "" || pid == strconv.Itoa(os.Getpid()))
	return s, nil
}

// env returns CMD's environment: environ with relock's own notify
// variables replaced by where CMD reports, and how often at least
// (WATCHDOG_USEC; sd_notify's clients report every half of it).
// WATCHDOG_PID, systemd's for relock, would tell CMD the watchdog is not
// its own: it goes.
func (s *notifySocket) env(environ []string) []string {
	env := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name != "NOTIFY_SOCKET" && name != "WATCHDOG_USEC" && name != "WATCHDOG_PID" {
			env = append(env, kv)
		}
	}
	return append(env,
		"NOTIFY_SOCKET="+s.conn.LocalAddr().String(),
		"WATCHDOG_USEC="+strconv.FormatInt(s.within.Microseconds(), 10))
}

// serve reads CMD's datagrams until the socket is closed, reporting to
// the hold behind held.
func (s *notifySocket) serve(held context.Context) {
	buf := make([]byte, 4096)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return
		}
		if up := s.read(held, string(buf[:n])); len(up) > 0 {
			s.tell(up)
		}
	}
}

// read applies one datagram of CMD's and returns what goes upstream.
func (s *notifySocket) read(held context.Context, datagram string) (up []string) {
	for line := range strings.Lines(datagram) {
		line = strings.TrimSpace(line)
		name, value, _ := strings.Cut(line, "=")
		switch name {
		case "WATCHDOG":
			switch value {
			case "1":
				if reentrant.ProgressDue(held, s.within) && s.watchdog {
					up = append(up, line)
				}
			case "trigger":
				reentrant.ProgressDue(held, 0)
			}
		case "WATCHDOG_USEC":
			if d, ok := micros(value); ok {
				s.within = d
				reentrant.ProgressDue(held, d)
			}
		case "EXTEND_TIMEOUT_USEC":
			if d, ok := micros(value); ok {
				reentrant.ProgressDue(held, d)
			}
		case "READY", "STATUS", "STOPPING", "RELOADING", "MONOTONIC_USEC":
			if s.upstream != "" {
				up = append(up, line)
			}
		}
	}
	return up
}

// micros reads a count of microseconds of at least 1.
func micros(v string) (time.Duration, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return time.Duration(n) * time.Microsecond, err == nil && n > 0
}

// tell sends lines to relock's own NOTIFY_SOCKET, as one datagram; a
// socket that is gone is systemd's to worry about, not CMD's.
func (s *notifySocket) tell(lines []string) {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.upstream, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(strings.Join(lines, "\n") + "\n"))
}

func (s *notifySocket) close() {
	s.conn.Close()
	os.RemoveAll(s.dir)
}
