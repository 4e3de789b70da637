package redistest

import (
	"strings"
	"testing"
	"time"
)

// clusterAdmin is the name CLUSTER goes by on a proxy-like server: the test
// can still give it slots, while clients that ask CLUSTER SLOTS are told
// there is no such command, as a cluster proxy tells them.
const clusterAdmin = "relock-cluster-admin"

// StartProxyLike runs a server that looks to clients as a cluster proxy
// does (Redis Enterprise, Envoy and the like): one address, no CLUSTER
// command, so rueidis makes an ordinary single-node client, and yet every
// command or script whose keys are in more than one hash slot is refused
// with CROSSSLOT, since behind a real proxy those slots may be on different
// shards. It is a cluster-enabled redis-server that owns all 16384 slots,
// with CLUSTER renamed.
func StartProxyLike(t testing.TB) *Server {
	t.Helper()
	s := Start(t,
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--rename-command", "CLUSTER", clusterAdmin,
	)
	if err := s.Do(clusterAdmin, "ADDSLOTSRANGE", "0", "16383").Error(); err != nil {
		t.Fatalf("redistest: giving the proxy-like server every slot: %v", err)
	}
	Eventually(t, 10*time.Second, "the proxy-like server's cluster state to be ok", func() bool {
		info, err := s.Do(clusterAdmin, "INFO").ToString()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	return s
}
