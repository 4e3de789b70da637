package election_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
)

// told are the errors a bad input may get: each says what is wrong.
var told = []error{reentrant.ErrInvalidArgument, reentrant.ErrClosed, reentrant.ErrWrongType,
	reentrant.ErrReentry, election.ErrNotLeader, election.ErrNoLeader, election.ErrStaleTerm, context.Canceled}

// TestBadInputsAreTold runs every call of the package with bad input: nil
// and closed Clients, empty names, nil and ended contexts, contexts that
// do not lead, keys of every other type where the record, the lock or a
// fenced value belongs, terms of 0 and below, fences' own keys. None
// panics, each error is one of relock's (errors.Is) and none is a raw
// script or parse error; an observer says why in its one Observed.
func TestBadInputsAreTold(t *testing.T) {
	s := start(t)
	n := newNode(t, s, 0)
	closed, err := reentrant.New(s.Client(), reentrant.Options{})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	for key, cmd := range map[string][]string{
		"relock_election:{hash-record}": {"HSET", "relock_election:{hash-record}", "owner", "x", "term", "1"}, // a record whose owner holds nothing
		"relock_election:{str-record}":  {"SET", "relock_election:{str-record}", "x"},
		"relock_election:{list-record}": {"RPUSH", "relock_election:{list-record}", "x"},
		"str-lock":                      {"SET", "str-lock", "x"},
		"list-lock":                     {"RPUSH", "list-lock", "x"},
		"set-value":                     {"SADD", "set-value", "x"},
		"zset-value":                    {"ZADD", "zset-value", "1", "x"},
		"relock_fence:{bad-fence}":      {"SET", "relock_fence:{bad-fence}", "ten"},
		// A roll of candidates of another type, and one with an entry
		// that is no entry.
		"relock_election_candidates:{str-roll}": {"SET", "relock_election_candidates:{str-roll}", "x"},
		"relock_election_candidates:{bad-roll}": {"HSET", "relock_election_candidates:{bad-roll}", "someone", "garbage"},
	} {
		require.NoError(t, s.Do(cmd...).Error(), key)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context
	ctxs := map[string]context.Context{"nil ctx": nilCtx, "ended ctx": cancelled, "background": context.Background()}
	handles := map[string]*election.Election{
		"nil Client":       election.New(nil, "x", election.Options{}),
		"closed Client":    election.New(closed, "x", election.Options{}),
		"empty name":       election.New(n.c, "", election.Options{}),
		"nil Election":     nil,
		"hash record":      n.election("hash-record"),
		"string record":    n.election("str-record"),
		"list record":      n.election("list-record"),
		"string lock":      n.election("str-lock"),
		"list lock":        n.election("list-lock"),
		"never campaigned": n.election("fresh"),
		"string roll":      n.election("str-roll"),
		"garbled roll":     n.election("bad-roll"),
	}
	cases := 0
	check := func(what string, err error) {
		t.Helper()
		cases++
		if err == nil {
			return
		}
		assert.True(t, slicesAny(told, func(e error) bool { return errors.Is(err, e) }), "%s: %v", what, err)
		for _, raw := range []string{"@user_script", "strconv", "attempt to compare"} {
			assert.NotContains(t, err.Error(), raw, what)
		}
	}
	call := func(what string, fn func() error) {
		t.Helper()
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s panicked: %v", what, p)
			}
		}()
		check(what, fn())
	}
	for hn, e := range handles {
		for cn, ctx := range ctxs {
			what := hn + ", " + cn
			call(what+": Leader", func() error { _, err := e.Leader(ctx); return err })
			call(what+": Proclaim", func() error { return e.Proclaim(ctx, "v") })
			call(what+": Resign", func() error { return e.Resign(ctx) })
			call(what+": Resign To", func() error { return e.Resign(ctx, election.To("nobody")) })
			call(what+": Candidates", func() error { _, err := e.Candidates(ctx); return err })
			call(what+": RequestResign", func() error { _, err := e.RequestResign(ctx, election.To("nobody")); return err })
			call(what+": ObserveCandidates", func() error {
				if cn == "background" && (hn == "never campaigned" || strings.Contains(hn, "record") || strings.Contains(hn, "lock") || hn == "garbled roll") {
					return nil // a live observer, which would wait for news
				}
				o, ok := <-e.ObserveCandidates(ctx)
				if ok && o.Err == nil && hn == "string roll" {
					return fmt.Errorf("an observer of a string roll saw %+v, not an error", o)
				}
				if ok {
					return o.Err
				}
				return nil
			})
			call(what+": Run nil fn", func() error { return e.Run(ctx, "v", nil) })
			call(what+": Observe", func() error {
				if ctx == nil || hn == "nil Client" || hn == "closed Client" || hn == "empty name" || hn == "nil Election" || strings.Contains(hn, "record") || strings.Contains(hn, "lock") {
					o, ok := <-e.Observe(ctx)
					if ok && o.Err == nil && (strings.Contains(hn, "string") || strings.Contains(hn, "list")) {
						return fmt.Errorf("an observer of a %s saw %+v, not an error", hn, o)
					}
					if ok {
						return o.Err
					}
				}
				return nil
			})
			if cn != "background" || hn == "never campaigned" || hn == "hash record" || strings.Contains(hn, "roll") {
				call(what+": Campaign", func() error {
					leading, _, err := e.Campaign(ctx, "v")
					if err == nil {
						return e.Resign(leading)
					}
					return err
				})
			}
		}
	}
	f := election.NewFenced(n.c)
	for _, key := range []string{"", "relock_fence:{x}", "set-value", "zset-value", "bad-fence", "fine"} {
		for _, term := range []election.Term{-1, 0, 1} {
			call(fmt.Sprintf("Fenced.Set %q term %d", key, term), func() error { return f.Set(context.Background(), key, term, "v") })
			call(fmt.Sprintf("Fenced.Get %q term %d", key, term), func() error { _, _, err := f.Get(context.Background(), key, term); return err })
		}
	}
	call("Fenced of a closed Client", func() error { return election.NewFenced(closed).Set(context.Background(), "k", 1, "v") })
	call("Fenced of nil", func() error { return election.NewFenced(nil).Set(context.Background(), "k", 1, "v") })
	call("Fenced nil ctx", func() error { return f.Set(nilCtx, "k", 1, "v") })
	assert.GreaterOrEqual(t, cases, 80)
	t.Logf("%d bad inputs, each told", cases)
	v, _ := s.Do("SMEMBERS", "set-value").AsStrSlice()
	assert.Equal(t, []string{"x"}, v, "a set given to Fenced is as it was")
}

func slicesAny[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

// A fence that holds anything but a whole, unsigned number of digits is
// corrupted: a read or write through it is ErrWrongType, naming the fence,
// with no raw script error and nothing changed. A check that matched only
// the fence's start ("12abc") or tolerated signs, spaces or a fraction
// would let Lua's tonumber fail, or compare what is not a term.
func TestFencedRefusesCorruptedFences(t *testing.T) {
	s := start(t)
	f := election.NewFenced(newNode(t, s, 0).c)
	ctx := context.Background()
	for _, bad := range []string{"12abc", "12 ", " 12", "+12", "-12", "1.5", "1e3", "0x10", ""} {
		s.Do("SET", "relock_fence:{config}", bad)
		s.Do("SET", "config", "before")
		err := f.Set(ctx, "config", 99, "after")
		assert.ErrorIs(t, err, reentrant.ErrWrongType, "fence %q", bad)
		assert.ErrorContains(t, err, "relock_fence:{config}", "fence %q", bad)
		assert.NotContains(t, err.Error(), "@user_script", "fence %q", bad)
		_, _, err = f.Get(ctx, "config", 99)
		assert.ErrorIs(t, err, reentrant.ErrWrongType, "fence %q", bad)
		v, _ := s.Do("GET", "config").ToString()
		fence, _ := s.Do("GET", "relock_fence:{config}").ToString()
		assert.Equal(t, "before", v, "fence %q: nothing written", bad)
		assert.Equal(t, bad, fence, "fence %q: the fence unchanged", bad)
	}
}
