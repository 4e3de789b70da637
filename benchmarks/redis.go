package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// server is the redis-server this run starts on a free loopback port, and
// stops by its PID.
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	rdb  rueidis.Client // admin connection: stats and resets
}

func startRedis() (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "relock-bench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server (is it installed?): %w", err)
	}
	s := &server{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s.rdb, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true}); err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, err
		}
	}
}

func (s *server) stop() {
	if s.rdb != nil {
		s.rdb.Close()
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	os.RemoveAll(s.dir)
}

func (s *server) do(args ...string) rueidis.RedisResult {
	return s.rdb.Do(context.Background(), s.rdb.B().Arbitrary(args...).Build())
}

func (s *server) version() string {
	info, _ := s.do("INFO", "server").ToString()
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// commands returns INFO commandstats totals: script calls (EVAL, EVALSHA)
// and all commands, those run by scripts included, but not this run's own
// INFO and CONFIG.
func (s *server) commands() (scripts, all int64) {
	info, _ := s.do("INFO", "commandstats").ToString()
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":calls=")
		if !ok || name == "cmdstat_info" || name == "cmdstat_config" {
			continue
		}
		n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		all += n
		if name == "cmdstat_evalsha" || name == "cmdstat_eval" || name == "cmdstat_evalsha_ro" || name == "cmdstat_eval_ro" {
			scripts += n
		}
	}
	return scripts, all
}

// usedMemory returns INFO memory's used_memory, in bytes.
func (s *server) usedMemory() int64 {
	info, _ := s.do("INFO", "memory").ToString()
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
