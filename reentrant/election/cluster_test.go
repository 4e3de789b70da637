package election_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// TestElectionOnCluster: on a Redis Cluster, with classic and with sharded
// pub/sub, a Resign hands over to the candidate on another client, and an
// observer (on the election's shard, with sharded pub/sub) sees both
// terms.
func TestElectionOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	for _, mode := range []reentrant.PubSubMode{reentrant.PubSubClassic, reentrant.PubSubSharded} {
		t.Run(mode.String(), func(t *testing.T) {
			elect := func() *election.Election {
				rdb := cl.Client()
				c, err := reentrant.New(rdb, reentrant.Options{PubSub: mode})
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				return election.New(c, rdb, "cluster-election-"+mode.String())
			}
			a, b := elect(), elect()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			seen := b.Observe(ctx)
			assert.Equal(t, "", redistest.Recv(t, seen).Owner)

			heldA, termA, err := a.Campaign(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, termA, redistest.Recv(t, seen).Term)
			type led struct {
				held context.Context
				term election.Term
				err  error
			}
			got := make(chan led, 1)
			go func() {
				held, term, err := b.Campaign(ctx, "b")
				got <- led{held, term, err}
			}()
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
		})
	}
}
