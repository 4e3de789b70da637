package redistest

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Cluster is a Redis Cluster of 3 masters, each with one replica.
type Cluster struct {
	Servers []*Server
	t       testing.TB
}

// clusterArgs make failover quick and reliable: a short node timeout, no
// refusal of replicas whose data is old, no diskless sync delay.
var clusterArgs = []string{
	"--cluster-enabled", "yes",
	"--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "1000",
	"--cluster-replica-validity-factor", "0",
	"--repl-diskless-sync", "yes",
	"--repl-diskless-sync-delay", "0",
}

// StartCluster runs 6 servers, joins them with redis-cli --cluster create
// (3 masters, 1 replica each) and waits until every node reports the
// cluster ok and every replica is in sync.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: redis-cli is needed to form a cluster: %v", err)
	}
	c := &Cluster{t: t}
	args := []string{"--cluster", "create"}
	for i := 0; i < 6; i++ {
		s := Start(t, clusterArgs...)
		c.Servers = append(c.Servers, s)
		args = append(args, s.Addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy()
	return c
}

// Addrs returns every node's address, for rueidis's InitAddress.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Addr
	}
	return out
}

// Client returns a rueidis cluster client, closed when the test ends.
func (c *Cluster) Client(opt ...func(*rueidis.ClientOption)) rueidis.Client {
	c.t.Helper()
	o := rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true}
	for _, f := range opt {
		f(&o)
	}
	rdb, err := rueidis.NewClient(o)
	if err != nil {
		c.t.Fatalf("redistest: cluster client: %v", err)
	}
	c.t.Cleanup(rdb.Close)
	return rdb
}

// Node is one line of CLUSTER NODES.
type Node struct {
	ID, Addr string
	Master   bool
	MasterID string // for a replica
	Slots    [][2]int
}

// Nodes returns the cluster's nodes as the first server that answers sees
// them.
func (c *Cluster) Nodes() []Node {
	c.t.Helper()
	for _, s := range c.Servers {
		if nodes, err := nodesSeenBy(s); err == nil {
			return nodes
		}
	}
	c.t.Fatalf("redistest: no cluster node answers CLUSTER NODES")
	return nil
}

// nodesSeenBy returns the nodes as server s sees them (CLUSTER NODES), the
// failed ones left out.
func nodesSeenBy(s *Server) ([]Node, error) {
	out, err := s.Do("CLUSTER", "NODES").ToString()
	if err != nil {
		return nil, err
	}
	var nodes []Node
	out = strings.TrimPrefix(out, "txt:") // a RESP3 verbatim string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || strings.Contains(f[2], "fail") {
			continue
		}
		n := Node{ID: f[0], Addr: strings.Split(f[1], "@")[0], Master: strings.Contains(f[2], "master"), MasterID: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// Masters returns the nodes that serve slots.
func (c *Cluster) Masters() []Node {
	var masters []Node
	for _, n := range c.Nodes() {
		if n.Master {
			masters = append(masters, n)
		}
	}
	return masters
}

// Owner returns the master that serves slot, as the first node that
// answers sees it; ok is false while none does.
func (c *Cluster) Owner(slot int) (master Node, ok bool) {
	return owner(c.Nodes(), slot)
}

func owner(nodes []Node, slot int) (Node, bool) {
	for _, n := range nodes {
		for _, r := range n.Slots {
			if n.Master && slot >= r[0] && slot <= r[1] {
				return n, true
			}
		}
	}
	return Node{}, false
}

// MasterOf returns the node that serves slot, and its replica, failing the
// test when either is missing.
func (c *Cluster) MasterOf(slot int) (master, replica Node) {
	c.t.Helper()
	nodes := c.Nodes()
	master, _ = owner(nodes, slot)
	for _, n := range nodes {
		if !n.Master && n.MasterID == master.ID {
			replica = n
		}
	}
	if master.ID == "" || replica.ID == "" {
		c.t.Fatalf("redistest: no master with a replica for slot %d", slot)
	}
	return master, replica
}

// Server returns the server at addr.
func (c *Cluster) Server(addr string) *Server {
	for _, s := range c.Servers {
		if s.Addr == addr {
			return s
		}
	}
	c.t.Fatalf("redistest: no server at %s", addr)
	return nil
}

// WaitHealthy waits until every running node reports cluster_state:ok and
// 3 masters each have a replica whose link is up.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	Eventually(c.t, 60*time.Second, "cluster healthy", func() bool {
		for _, s := range c.Servers {
			info, err := s.Do("CLUSTER", "INFO").ToString()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		masters, linked := 0, 0
		for _, s := range c.Servers {
			info, err := s.Do("INFO", "replication").ToString()
			if err != nil {
				return false
			}
			if strings.Contains(info, "role:master") {
				masters++
			} else if strings.Contains(info, "master_link_status:up") {
				linked++
			}
		}
		if masters != 3 || linked != 3 {
			return false
		}
		// Every node must also see the others as they are: gossip may lag
		// the roles, and tests read the topology from any node.
		for _, s := range c.Servers {
			nodes, err := nodesSeenBy(s)
			if err != nil || len(nodes) != len(c.Servers) {
				return false
			}
			seen := 0
			for _, n := range nodes {
				if n.Master {
					seen++
				}
			}
			if seen != 3 {
				return false
			}
		}
		return true
	})
}
