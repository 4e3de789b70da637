package reentrant_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

// asCluster passes commands to a real server as a cluster client would
// (New asks a cluster's version, to pick the pub/sub kind), and breaks the
// connection under the first failing calls.
type asCluster struct {
	rueidis.Client
	failing int
	calls   atomic.Int32
}

func (c *asCluster) Mode() rueidis.ClientMode { return rueidis.ClientModeCluster }

func (c *asCluster) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if int(c.calls.Add(1)) <= c.failing {
		return connReset()
	}
	return c.Client.Do(ctx, cmd)
}

// connReset is the result of a command whose connection broke before its
// reply came.
func connReset() rueidis.RedisResult {
	return rueidis.NewErrorResult(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
}

// New asks a cluster one question; a service started while Redis restarts
// must not die of it: a connection that breaks is asked again, and an
// answer that refuses fails New at once, saying why.
func TestNewRidesOutOutage(t *testing.T) {
	s := redistest.Start(t)

	broken := &asCluster{Client: s.Client(), failing: 3}
	c, err := reentrant.New(broken, reentrant.Options{})
	require.NoError(t, err, "three broken connections at start")
	defer c.Close()
	assert.Equal(t, reentrant.PubSubSharded, c.PubSubMode(), "Redis 7 cluster")
	assert.EqualValues(t, 4, broken.calls.Load(), "asked until answered")

	s.Do("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info")
	refused := &asCluster{Client: s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "noinfo", "pw" })}
	_, err = reentrant.New(refused, reentrant.Options{})
	var re *rueidis.RedisError
	require.True(t, errors.As(err, &re), "the refusal is in the error: %v", err)
	assert.Contains(t, err.Error(), "NOPERM")
	assert.EqualValues(t, 1, refused.calls.Load(), "a refusal is not asked again")
}
