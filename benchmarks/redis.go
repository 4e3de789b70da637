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

// snapshot is what the server had done at one moment: calls by command
// name (a script's own commands included, the harness's INFO, CONFIG,
// FLUSHALL and DBSIZE left out), CPU seconds, and memory.
type snapshot struct {
	calls map[string]int64
	usec  map[string]int64 // time spent in each command, µs
	cpu   float64          // used_cpu_user + used_cpu_sys
	mem   int64            // used_memory
}

// harness are the commands this program sends itself.
var harness = map[string]bool{"info": true, "config": true, "flushall": true, "dbsize": true}

func (s *server) snapshot() snapshot {
	info, _ := s.do("INFO", "commandstats").ToString()
	cpu, _ := s.do("INFO", "cpu").ToString()
	snap := snapshot{calls: map[string]int64{}, usec: map[string]int64{}, mem: s.usedMemory()}
	sc := bufio.NewScanner(strings.NewReader(info + "\n" + cpu))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, rest, ok := strings.Cut(line, ":calls="); ok {
			name = strings.TrimPrefix(name, "cmdstat_")
			if !harness[name] {
				fields := strings.Split(rest, ",")
				snap.calls[name], _ = strconv.ParseInt(fields[0], 10, 64)
				if len(fields) > 1 {
					snap.usec[name], _ = strconv.ParseInt(strings.TrimPrefix(fields[1], "usec="), 10, 64)
				}
			}
			continue
		}
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				sec, _ := strconv.ParseFloat(v, 64)
				snap.cpu += sec
			}
		}
	}
	return snap
}

// cost returns what the server did from before to after, per unit (a pair
// or an acquisition): its CPU time, its commands in all and by name (as
// "cmd:<name>"), and the keys and memory left now beside before. Call it
// after the clients closed, so that what they left is what stays.
func (s *server) cost(before, after snapshot, units float64, unit string) result {
	units = max(units, 1)
	res := result{"redis cpu µs/" + unit: (after.cpu - before.cpu) * 1e6 / units}
	var all int64
	for name, n := range after.calls {
		if d := n - before.calls[name]; d > 0 {
			res["cmd:"+name] = float64(d) / units
			res["µs:"+name] = float64(after.usec[name]-before.usec[name]) / units
			all += d
		}
	}
	res["cmds/"+unit] = float64(all) / units
	keys, _ := s.do("DBSIZE").AsInt64()
	res["keys left"] = float64(keys)
	res["memory left KB"] = float64(after.mem-before.mem) / 1024
	return res
}
