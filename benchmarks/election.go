package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// An election's takeover, relock's beside etcd's concurrency.Election on
// the same machine: how long after the leader resigns the next candidate,
// already campaigning, leads; and after the leader's process loses its
// server (its client closed, nothing released), with each side's liveness
// set to 1 s (relock's WatchdogTimeout; etcd's session TTL, which etcd
// raises to its minimum lease TTL).

// candidate is one side's campaign, made for one process.
type candidate interface {
	campaign(ctx context.Context) error
	resign(ctx context.Context) error
	die() // the process loses its server: nothing is released
}

// side makes candidates of one library.
type side struct {
	name string
	make func() (candidate, error)
}

// runElection prints the takeover table for relock and, when the etcd
// binary is installed, etcd.
func runElection(s *server, rounds int) error {
	sides := []side{relockSide(s)}
	etcd, err := startEtcd()
	if err != nil {
		fmt.Printf("(etcd left out: %v)\n\n", err)
	} else {
		defer etcd.stop()
		sides = append(sides, etcdSide(etcd.addr))
	}
	fmt.Printf("| library | after Resign p50 | max | after the leader died p50 | max |\n|---|---|---|---|---|\n")
	for _, sd := range sides {
		resign, err := takeovers(sd, rounds, false)
		if err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
		died, err := takeovers(sd, max(rounds/4, 3), true)
		if err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", sd.name, ms(p50(resign)), ms(slices.Max(resign)), ms(p50(died)), ms(slices.Max(died)))
	}
	return nil
}

// takeovers measures n takeovers: a leader, a candidate campaigning behind
// it for 20ms, then the leader resigns (or dies); the time until the
// candidate leads.
func takeovers(sd side, n int, die bool) ([]time.Duration, error) {
	ctx := context.Background()
	var took []time.Duration
	for range n {
		leader, err := sd.make()
		if err != nil {
			return nil, err
		}
		next, err := sd.make()
		if err != nil {
			return nil, err
		}
		if err := leader.campaign(ctx); err != nil {
			return nil, err
		}
		led := make(chan error, 1)
		go func() { led <- next.campaign(ctx) }()
		time.Sleep(20 * time.Millisecond)
		start := time.Now()
		if die {
			leader.die()
		} else if err := leader.resign(ctx); err != nil {
			return nil, err
		}
		if err := <-led; err != nil {
			return nil, err
		}
		took = append(took, time.Since(start))
		if err := next.resign(ctx); err != nil {
			return nil, err
		}
		leader.die()
		next.die()
	}
	return took, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// quiet drops relock's log: a dead leader's "lock lost" is the point.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// relock's candidate: a client of its own on the benchmark's Redis.
type relockCandidate struct {
	rdb     rueidis.Client
	c       *reentrant.Client
	e       *election.Election
	leading context.Context
}

func relockSide(s *server) side {
	return side{"relock", func() (candidate, error) {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true})
		if err != nil {
			return nil, err
		}
		c, err := reentrant.New(rdb, reentrant.Options{WatchdogTimeout: time.Second, Logger: quiet})
		if err != nil {
			rdb.Close()
			return nil, err
		}
		return &relockCandidate{rdb: rdb, c: c, e: election.New(c, "bench-election", election.Options{})}, nil
	}}
}

func (r *relockCandidate) campaign(ctx context.Context) (err error) {
	r.leading, _, err = r.e.Campaign(ctx, "v")
	return err
}

func (r *relockCandidate) resign(context.Context) error { return r.e.Resign(r.leading) }

func (r *relockCandidate) die() {
	r.rdb.Close()
	r.c.Close()
}

// etcd's candidate: a client and session of its own.
type etcdCandidate struct {
	cli *clientv3.Client
	s   *concurrency.Session
	e   *concurrency.Election
}

func etcdSide(addr string) side {
	return side{"etcd concurrency.Election", func() (candidate, error) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(1))
		if err != nil {
			cli.Close()
			return nil, err
		}
		return &etcdCandidate{cli: cli, s: s, e: concurrency.NewElection(s, "/bench-election")}, nil
	}}
}

func (e *etcdCandidate) campaign(ctx context.Context) error { return e.e.Campaign(ctx, "v") }

func (e *etcdCandidate) resign(ctx context.Context) error { return e.e.Resign(ctx) }

func (e *etcdCandidate) die() { e.cli.Close() } // the session's lease is not revoked: it expires

// etcdServer is an etcd started for the run.
type etcdServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

// startEtcd starts the installed etcd on free loopback ports, with its
// defaults otherwise (heartbeat 100ms, election 1s).
func startEtcd() (*etcdServer, error) {
	if _, err := exec.LookPath("etcd"); err != nil {
		return nil, fmt.Errorf("no etcd binary (Debian: apt install etcd-server)")
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	dir, err := os.MkdirTemp("", "relock-bench-etcd-")
	if err != nil {
		return nil, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cmd := exec.Command("etcd", "--name", "bench", "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &etcdServer{addr: client, cmd: cmd, dir: dir}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = cli.Put(ctx, "/bench-ready", "1")
		cancel()
		cli.Close()
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("etcd did not come up: %w", err)
	}
	return s, nil
}

func (s *etcdServer) stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
	os.RemoveAll(s.dir)
}
