package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// exitStalled is run's and elect's exit code when CMD went
// --progress-within without reporting progress, as timeout(1)'s when its
// command timed out.
const exitStalled = 124

// notifySocket is where CMD reports progress, with systemd's notify
// protocol (sd_notify(3)), so that programs that support a systemd
// watchdog work unchanged: relock gives CMD NOTIFY_SOCKET, a datagram
// socket of its own, and WATCHDOG_USEC, the deadline, and counts every
// WATCHDOG=1 as progress. Other messages (READY=1, STATUS=...) are read
// and ignored.
type notifySocket struct {
	conn *net.UnixConn
	dir  string
}

// listenNotify makes the socket, in a directory of its own that close
// removes.
func listenNotify() (*notifySocket, error) {
	dir, err := os.MkdirTemp("", "relock-notify-")
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &notifySocket{conn: conn, dir: dir}, nil
}

// env is what CMD's environment gets: where to report, and how often at
// least (WATCHDOG_USEC; sd_notify's clients report every half of it).
func (s *notifySocket) env(within time.Duration) []string {
	return []string{
		"NOTIFY_SOCKET=" + s.conn.LocalAddr().String(),
		"WATCHDOG_USEC=" + strconv.FormatInt(within.Microseconds(), 10),
	}
}

// serve calls progress for every WATCHDOG=1 until the socket is closed.
func (s *notifySocket) serve(progress func()) {
	buf := make([]byte, 4096)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return
		}
		for line := range strings.Lines(string(buf[:n])) {
			if strings.TrimSpace(line) == "WATCHDOG=1" {
				progress()
			}
		}
	}
}

func (s *notifySocket) close() {
	s.conn.Close()
	os.RemoveAll(s.dir)
}
