package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
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

// TestDocumentedACLUsers: the user docs/deployment.md gives for locks and
// lock events watches with nothing refused; one with the locks' line
// alone is refused with ErrNoPermission naming what a watch needs; the
// line for turning notifications on lets a watch do so, and without it
// the refusal names +config|set.
func TestDocumentedACLUsers(t *testing.T) {
	ctx := context.Background()
	locks, watches, enable := redistest.DocumentedACL(t, "locks"), redistest.DocumentedACL(t, "lock events (package"), redistest.DocumentedACL(t, "lock events that turn")

	s := notifying(t)
	c := aclClient(t, s, "watcher", append(locks, watches...)...)
	ch, err := events.Watch(ctx, c, "acl", events.Options{})
	require.NoError(t, err)
	held, err := c.Lock("acl").Lock(ctx)
	require.NoError(t, err)
	expect(t, ch, events.Acquired, ownerOf(t, held))
	require.NoError(t, c.Lock("acl").Unlock(held))
	expect(t, ch, events.Released, ownerOf(t, held))

	_, err = events.Watch(ctx, aclClient(t, s, "locksonly", locks...), "acl", events.Options{})
	assert.ErrorIs(t, err, reentrant.ErrNoPermission)
	assert.ErrorContains(t, err, "+config|get")

	quiet := redistest.Start(t) // notifications off
	_, err = events.Watch(ctx, aclClient(t, quiet, "noenable", append(locks, watches...)...), "acl", events.Options{EnableNotifications: true})
	assert.ErrorIs(t, err, reentrant.ErrNoPermission)
	assert.ErrorContains(t, err, "+config|set")
	_, err = events.Watch(ctx, aclClient(t, quiet, "enabler", append(append(locks, watches...), enable...)...), "acl", events.Options{EnableNotifications: true})
	require.NoError(t, err)
}

// aclClient is a Client of s that connects as a new ACL user with rules.
func aclClient(t *testing.T, s *redistest.Server, user string, rules ...string) *reentrant.Client {
	t.Helper()
	require.NoError(t, s.Do(append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw"}, rules...)...).Error())
	return client(t, s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = user, "pw" }), 0)
}

// TestBadInputsAreTold: Watch with every bad input (nil and ended
// contexts, nil and closed Clients, empty names, keys of every type that
// is neither a lock nor a count) neither panics nor returns a raw error:
// each is one of relock's, by errors.Is.
func TestBadInputsAreTold(t *testing.T) {
	s := notifying(t)
	c := client(t, s.Client(), 0)
	closed := client(t, s.Client(), 0)
	require.NoError(t, closed.Close())
	for _, cmd := range [][]string{{"SET", "str", "x"}, {"RPUSH", "list", "x"}, {"SADD", "set", "x"}, {"ZADD", "zset", "1", "x"}, {"SET", "float", "1.5"}} {
		require.NoError(t, s.Do(cmd...).Error())
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context
	told := []error{reentrant.ErrInvalidArgument, reentrant.ErrClosed, reentrant.ErrWrongType, context.Canceled}
	cases := 0
	for _, ctx := range []context.Context{nilCtx, ended, context.Background()} {
		for _, cl := range []*reentrant.Client{nil, closed, c} {
			for _, name := range []string{"", "str", "list", "set", "zset", "float"} {
				for _, opts := range []events.Options{{}, {Unchecked: true}} {
					cases++
					func() {
						defer func() {
							if p := recover(); p != nil {
								t.Errorf("Watch(%v, %q, %+v) panicked: %v", cl != nil, name, opts, p)
							}
						}()
						ch, err := events.Watch(ctx, cl, name, opts)
						if !assert.Error(t, err, "%q", name) {
							for range ch {
							}
							return
						}
						ok := false
						for _, e := range told {
							ok = ok || errors.Is(err, e)
						}
						assert.True(t, ok, "%q: %v", name, err)
						assert.NotContains(t, err.Error(), "strconv")
					}()
				}
			}
		}
	}
	assert.GreaterOrEqual(t, cases, 80)
}

// TestWatchReadsAgainAfterItsConnection: a holder that comes while the
// watch is without its connection (killed, and refused again until the
// test allows it) is told once the watch is back: Missed, then Acquired.
func TestWatchReadsAgainAfterItsConnection(t *testing.T) {
	s := notifying(t)
	require.NoError(t, s.Do("ACL", "SETUSER", "w", "on", ">pw", "~*", "&*", "+@all").Error())
	c := client(t, s.Client(func(o *rueidis.ClientOption) { o.Username, o.Password = "w", "pw" }), 0)
	other := client(t, s.Client(), 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := events.Watch(ctx, c, "gap", events.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Do("ACL", "SETUSER", "w", "-subscribe", "-psubscribe").Error())
	require.NoError(t, s.Do("CLIENT", "KILL", "USER", "w").Error())
	assert.Equal(t, events.Missed, next(t, ch).Kind)
	held, err := other.Lock("gap").Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Do("ACL", "SETUSER", "w", "+subscribe", "+psubscribe").Error())
	expect(t, ch, events.Acquired, ownerOf(t, held))
}

// A watch follows the lock where the Client's own locks are: on a Client
// whose NameMapper prefixes names, the mapped key; on a Client of a
// database other than 0, that database's notifications. A watch of the
// bare name, or of database 0's channel, would hear nothing of either.
func TestWatchFollowsTheClientsKeys(t *testing.T) {
	s := notifying(t)
	for name, opts := range map[string]struct {
		db     int
		mapper func(string) string
	}{
		"NameMapper": {mapper: func(n string) string { return "tenant-7:" + n }},
		"database 3": {db: 3},
		"both":       {db: 5, mapper: func(n string) string { return "tenant-7:" + n }},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := s.Client(func(o *rueidis.ClientOption) { o.SelectDB = opts.db })
			c, err := reentrant.New(rdb, reentrant.Options{NameMapper: opts.mapper})
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			ctx := t.Context()
			ch, err := events.Watch(ctx, c, "job", events.Options{})
			require.NoError(t, err)
			held, err := c.Lock("job").Lock(ctx)
			require.NoError(t, err)
			expect(t, ch, events.Acquired, ownerOf(t, held))
			require.NoError(t, c.Lock("job").Unlock(held))
			expect(t, ch, events.Released, ownerOf(t, held))
		})
	}
}
