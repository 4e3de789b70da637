package latches

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/scripts"
)

// Latches still queued when the client closes are deleted then, not left
// to their TTL: here every one, in more slots and more names than one DEL
// takes.
func TestLatchSweeperFlushesOnClose(t *testing.T) {
	s := redistest.Start(t)
	rdb := s.Client()
	sw := New(rdb, slog.New(slog.DiscardHandler))
	for i := 0; i < sweepBatch+100; i++ {
		name := scripts.Release{Key: fmt.Sprintf("lock:%d", i%7), RequestID: fmt.Sprint(i)}.Latch()
		require.NoError(t, s.Do("SET", name, "1", "PX", "60000").Error())
		sw.Drop(name)
	}
	closed, cancel := context.WithCancel(context.Background())
	cancel() // as Close does before the sweeper sees the queue
	sw.Run(closed)
	keys, err := s.Do("KEYS", "redisson_unlock_latch:*").AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys)
}
