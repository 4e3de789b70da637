package events_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/events"
)

// TestWatchEdges: a closed Client, a key that is neither a lock nor a
// count, an empty name: errors that say so, never nil or a parse error;
// and the Client's Close ends a watch with a last Missed saying
// ErrClosed.
func TestWatchEdges(t *testing.T) {
	s := notifying(t)
	c := client(t, s.Client(), 0)
	ctx := context.Background()

	_, err := events.Watch(ctx, c, "", events.Options{})
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)
	var nilCtx context.Context
	_, err = events.Watch(nilCtx, c, "job", events.Options{})
	assert.ErrorIs(t, err, reentrant.ErrInvalidArgument)

	require.NoError(t, s.Do("SET", "astring", "not a count").Error())
	_, err = events.Watch(ctx, c, "astring", events.Options{})
	assert.ErrorIs(t, err, reentrant.ErrWrongType)
	assert.NotContains(t, err.Error(), "strconv")
	require.NoError(t, s.Do("RPUSH", "alist", "x").Error())
	_, err = events.Watch(ctx, c, "alist", events.Options{})
	assert.ErrorIs(t, err, reentrant.ErrWrongType)

	ch, err := events.Watch(ctx, c, "job", events.Options{})
	require.NoError(t, err)
	held, err := c.Lock("job").Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
	require.NoError(t, c.Close())
	var last events.Event
	for ev := range ch { // closed by Close, though ctx lives on
		last = ev
	}
	assert.Equal(t, events.Missed, last.Kind)
	assert.ErrorIs(t, last.Err, reentrant.ErrClosed)

	_, err = events.Watch(ctx, c, "job", events.Options{})
	assert.ErrorIs(t, err, reentrant.ErrClosed)
}

// A Holder prints as a person reads it, as docs/events.md's
// log.Println(ev.Kind, ev.Holders) shows.
func TestHolderPrints(t *testing.T) {
	hs := []reentrant.Holder{{Owner: "c1:7", Count: 2}, {Owner: "c2:1", Count: 1, Write: true}, {Owner: "c3:4", Count: 1, Value: "v"}}
	assert.Equal(t, "[c1:7 ×2 c2:1 ×1 (write) v=c3:4 ×1]", fmt.Sprint(hs))
}
