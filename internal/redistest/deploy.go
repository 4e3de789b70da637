package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Settings for quick, reliable replication and failover in tests.
var replicaArgs = []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}

// Replicated is a master with replicas.
type Replicated struct {
	Master   *Server
	Replicas []*Server
}

// StartReplicated runs a master and n replicas of it, and waits until every
// replica is in sync.
func StartReplicated(t testing.TB, n int, extra ...string) *Replicated {
	t.Helper()
	r := &Replicated{Master: Start(t, append(append([]string{}, replicaArgs...), extra...)...)}
	host, port, _ := net.SplitHostPort(r.Master.Addr)
	for i := 0; i < n; i++ {
		args := append(append([]string{"--replicaof", host, port}, replicaArgs...), extra...)
		r.Replicas = append(r.Replicas, Start(t, args...))
	}
	r.WaitSynced(t)
	r.WaitAcked(t)
	return r
}

// WaitSynced waits until every replica's link to the master is up and the
// master counts them all as online.
func (r *Replicated) WaitSynced(t testing.TB) {
	t.Helper()
	Eventually(t, 30*time.Second, "replicas in sync", func() bool {
		// Online, not just connected: after a diskless sync the master
		// counts a replica (for WAIT too) only once it has acknowledged.
		info, err := r.Master.Do("INFO", "replication").ToString()
		if err != nil || strings.Count(info, "state=online") != len(r.Replicas) {
			return false
		}
		for _, rep := range r.Replicas {
			info, err := rep.Do("INFO", "replication").ToString()
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				return false
			}
		}
		return true
	})
}

// WaitAcked waits until every replica acknowledges a write the master has
// just taken: a replica counted online may not be streamed writes until its
// first acknowledgement (after a diskless sync, or a pause).
func (r *Replicated) WaitAcked(t testing.TB) {
	t.Helper()
	c := r.Master.Client(func(o *rueidis.ClientOption) { o.ForceSingleClient = true })
	n := int64(len(r.Replicas))
	Eventually(t, 30*time.Second, "replicas acknowledge", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// One pipeline: WAIT counts this connection's writes.
		res := c.DoMulti(ctx, c.B().Set().Key("redistest:ack").Value("1").Build(),
			c.B().Wait().Numreplicas(n).Timeout(100).Build())
		got, err := res[1].AsInt64()
		return err == nil && got == n
	})
	c.Close()
}

// Eventually polls cond every 20ms until it holds, failing the test after
// limit: the harness waits for events, not for fixed sleeps.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: %s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sentinels are Redis Sentinel processes watching one master, named
// "relock".
type Sentinels struct {
	Addrs  []string
	Master string // the name sentinels know the master by
}

// StartSentinels runs n sentinels (quorum n/2+1) watching master, with a
// 3s down-after and a 10s failover timeout, and waits until each knows
// the master's replicas.
//
// Why not shorter, on a busy machine (four copies of the suite under
// -race): a sentinel pings every instance once a second, so with a 1s
// down-after a new master whose first PONG came 40ms late was taken for
// down a second after its promotion, and a second failover promoted
// another replica, losing the lock taken on the first; and a sentinel that
// voted for another's failover starts one of its own two failover
// timeouts after its vote if it has not heard of the new master by then.
func StartSentinels(t testing.TB, master *Server, n, replicas int) *Sentinels {
	t.Helper()
	s := &Sentinels{Master: "relock"}
	host, port, _ := net.SplitHostPort(master.Addr)
	for i := 0; i < n; i++ {
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if err = s.start(t, host, port, n/2+1); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("redistest: sentinel: %v", err)
		}
	}
	for _, addr := range s.Addrs {
		Eventually(t, 30*time.Second, "sentinel "+addr+" sees the replicas", func() bool {
			out, err := rawDo(addr, "SENTINEL", "REPLICAS", s.Master)
			return err == nil && strings.Count(out, "slave ") >= replicas
		})
	}
	return s
}

func (s *Sentinels) start(t testing.TB, host, masterPort string, quorum int) error {
	p, err := FreePort()
	if err != nil {
		return err
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile %s
sentinel monitor %s %s %s %d
sentinel down-after-milliseconds %s 3000
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 2
`, p, dir, filepath.Join(dir, "sentinel.log"), s.Master, host, masterPort, quorum, s.Master, s.Master, s.Master)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(Binary(t), conf, "--sentinel")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	logfile := filepath.Join(dir, "sentinel.log")
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("sentinel on port %d log tail:\n%s", p, b)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	deadline := time.Now().Add(10 * time.Second)
	for ping(addr, nil, cmd.Process.Pid) != nil {
		select {
		case <-exited:
			return fmt.Errorf("sentinel on port %d exited at start", p)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sentinel on port %d did not answer PING", p)
		}
	}
	s.Addrs = append(s.Addrs, addr)
	return nil
}

// MasterAddr asks the first sentinel that answers for the master's address.
func (s *Sentinels) MasterAddr() (string, error) {
	var err error
	for _, a := range s.Addrs {
		var out string
		if out, err = rawDo(a, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.Master); err == nil {
			f := strings.Fields(out)
			if len(f) == 2 {
				return net.JoinHostPort(f[0], f[1]), nil
			}
			err = fmt.Errorf("unexpected reply %q", out)
		}
	}
	return "", err
}

// rawDo runs one command on addr with a fresh connection and returns the
// reply's strings joined by spaces (nested arrays flattened).
func rawDo(addr string, args ...string) (string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true, DisableRetry: true})
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	msg, err := c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
	if err != nil {
		return "", err
	}
	return strings.Join(flatten(msg), " "), nil
}

func flatten(m rueidis.RedisMessage) []string {
	if arr, err := m.ToArray(); err == nil {
		var out []string
		for _, e := range arr {
			out = append(out, flatten(e)...)
		}
		return out
	}
	if mp, err := m.AsStrMap(); err == nil {
		var out []string
		for k, v := range mp {
			out = append(out, k, v)
		}
		return out
	}
	s, _ := m.ToString()
	if s == "" {
		if n, err := m.AsInt64(); err == nil {
			s = strconv.FormatInt(n, 10)
		}
	}
	return []string{s}
}
