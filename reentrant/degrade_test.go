package reentrant_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A client that may not SUBSCRIBE (an ACL refuses it) still acquires: its
// waiters poll within the usual bounds, and it warns once, not per wait.
func TestSubscribeRefusedFallsBackToPolling(t *testing.T) {
	e := onRedis(t)
	require.NoError(t, e.do(t, "ACL", "SETUSER", "nosub", "on", ">pw", "~*", "&*", "+@all", "-subscribe", "-ssubscribe").Error())
	rdb := e.server.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "nosub", "pw" })
	var logs syncBuffer
	c, err := reentrant.New(rdb, reentrant.Options{
		RepollInterval: 20 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	defer c.Close()
	holder := e.client(t)

	for round := 0; round < 3; round++ {
		held, err := holder.Lock("polled").Lock(bg())
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			ctx, err := c.Lock("polled").Lock(bg())
			if err == nil {
				err = c.Lock("polled").Unlock(ctx)
			}
			got <- err
		}()
		eventually(t, "the waiter's failed subscription", func() bool {
			return strings.Contains(logs.String(), "cannot subscribe")
		})
		require.NoError(t, holder.Lock("polled").Unlock(held))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("polling waiter never acquired")
		}
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "cannot subscribe"), "warned once:\n%s", logs.String())
}
