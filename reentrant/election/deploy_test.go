package election_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// handover runs the election name on two clients that connect (each
// with opts): a leads, b campaigns behind it, a resigns and b leads with a
// larger term, while an observer on b's client sees both terms in order
// and nobody between.
func handover(t *testing.T, connect func() rueidis.Client, opts reentrant.Options, name string) {
	elect := func() *election.Election {
		rdb := connect()
		c, err := reentrant.New(rdb, opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return election.New(c, name, election.Options{})
	}
	a, b := elect(), elect()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := b.Observe(ctx)
	assert.Equal(t, "", redistest.Recv(t, seen).Owner)

	heldA, termA, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, termA, redistest.Recv(t, seen).Term)
	got := campaignAsync(ctx, b, "b")
	require.NoError(t, a.Resign(heldA))
	r := redistest.Recv(t, got)
	require.NoError(t, r.err)
	assert.Greater(t, r.term, termA)
	for l := redistest.Recv(t, seen); l.Term != r.term; l = redistest.Recv(t, seen) {
		assert.Equal(t, "", l.Owner, "between a and b, nobody")
	}
	l, err := a.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", l.Value)
	require.NoError(t, b.Resign(r.held))
}

// TestElectionOnCluster: on a Redis Cluster, with classic and with sharded
// pub/sub (the observer on the election's shard).
func TestElectionOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	for _, mode := range []reentrant.PubSubMode{reentrant.PubSubClassic, reentrant.PubSubSharded} {
		t.Run(mode.String(), func(t *testing.T) {
			handover(t, func() rueidis.Client { return cl.Client() }, reentrant.Options{PubSub: mode}, "cluster-election-"+mode.String())
		})
	}
}

// TestElectionBehindClusterProxy: behind a cluster proxy, where a script
// whose keys span two slots is refused, the election's keys share its
// lock's slot.
func TestElectionBehindClusterProxy(t *testing.T) {
	s := redistest.StartProxyLike(t)
	handover(t, func() rueidis.Client { return s.Client() }, reentrant.Options{}, "proxied-election")
}

// TestElectionWithSentinel: through Sentinel, a master with two replicas.
func TestElectionWithSentinel(t *testing.T) {
	r := redistest.StartReplicated(t, 2)
	s := redistest.StartSentinels(t, r.Master, 3, 2)
	handover(t, func() rueidis.Client {
		rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: s.Addrs, DisableCache: true,
			Sentinel: rueidis.SentinelOption{MasterSet: s.Master}})
		require.NoError(t, err)
		t.Cleanup(rdb.Close)
		return rdb
	}, reentrant.Options{}, "sentinel-election")
}
