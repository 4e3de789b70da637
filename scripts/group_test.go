package scripts_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/scripts"
)

// GroupField names a value's field as Redisson does, byte for byte: the
// vectors come from Redisson's own Hash.java (testdata/groupfields).
func TestGroupFieldMatchesRedisson(t *testing.T) {
	f, err := os.Open("testdata/groupfields/vectors.tsv")
	require.NoError(t, err)
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); n++ {
		in, want, ok := strings.Cut(s.Text(), "\t")
		require.True(t, ok, s.Text())
		value, err := hex.DecodeString(in)
		require.NoError(t, err)
		assert.Equal(t, want, scripts.GroupField(string(value)), "input %q", in)
	}
	assert.Equal(t, 75, n, "every vector read")
	assert.Equal(t, "7pNoDdizVy2xY792MaFv+w", scripts.GroupField("Jack_001"), "Redisson's own example value")
	assert.Equal(t, "relock_group:{class_100}:7pNoDdizVy2xY792MaFv+w", scripts.GroupValueChannel("class_100", "7pNoDdizVy2xY792MaFv+w"))
	assert.Equal(t, "relock_group:a{b}c:f", scripts.GroupValueChannel("a{b}c", "f"))
	fields := scripts.GroupFields([]string{"b", "a", "b"})
	assert.Len(t, fields, 2, "each value once")
	assert.ElementsMatch(t, []string{scripts.GroupField("a"), scripts.GroupField("b")}, fields)
}

// The group scripts keep Redisson's layout: values taken all at once or
// none, re-entry counted per value, a release that frees only what its
// owner holds, a renewal only of holds still the owner's.
func TestGroupScripts(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		ab := scripts.GroupFields([]string{"a", "b"})
		bc := scripts.GroupFields([]string{"b", "c"})
		c := scripts.GroupFields([]string{"c"})
		acquire := func(owner string, fields []string, lease time.Duration) scripts.Acquired {
			t.Helper()
			r, err := scripts.GroupAcquire(ctx, rdb, scripts.Acquire{Key: "g", Owner: owner, Lease: lease, Fields: fields})
			require.NoError(t, err)
			return r
		}
		release := func(owner string, fields []string) scripts.Released {
			t.Helper()
			r, err := scripts.GroupRelease(ctx, rdb, scripts.Release{Key: "g", Owner: owner, RequestID: "r" + owner,
				Lease: time.Minute, LatchTTL: time.Second, Publish: scripts.PublishClassic, Fields: fields})
			require.NoError(t, err)
			return r
		}
		hget := func(field string) string {
			s, _ := do("HGET", "g", field).ToString()
			return s
		}

		require.True(t, acquire("o:1", ab, time.Minute).OK)
		for _, f := range ab {
			assert.Equal(t, "o:1", hget(f))
			assert.Equal(t, "1", hget(f+":o:1:lock_count"))
			end, err := do("HGET", "g", f+":o:1:expire_time").AsInt64()
			require.NoError(t, err)
			assert.InDelta(t, time.Now().Add(time.Minute).UnixMilli(), end, 5000)
		}
		r := acquire("o:2", bc, time.Minute)
		assert.False(t, r.OK, "b is o:1's")
		assert.InDelta(t, time.Minute, r.PTTL, float64(5*time.Second))
		assert.Equal(t, scripts.GroupField("b"), r.Blocker)
		assert.Empty(t, hget(scripts.GroupField("c")), "all or none: c was not taken")
		require.True(t, acquire("o:2", c, time.Minute).OK, "a disjoint value")
		require.True(t, acquire("o:1", ab, time.Minute).OK, "re-entry")
		assert.Equal(t, "2", hget(ab[0]+":o:1:lock_count"))

		assert.Equal(t, scripts.NotHeld, release("o:2", ab), "not the holder")
		assert.Equal(t, "o:1", hget(ab[0]), "unchanged")
		assert.Equal(t, scripts.NotHeld, release("o:1", bc), "o:1 holds b but not c: nothing changes")
		assert.Equal(t, "2", hget(bc[0]+":o:1:lock_count"))

		renewed, errs := scripts.GroupRenew(ctx, rdb, time.Hour, [][]scripts.Held{{
			{Key: "g", Owner: "o:1", Fields: ab},
			{Key: "g", Owner: "o:1", Fields: bc},
			{Key: "g", Owner: "o:2", Fields: c},
		}})
		require.Equal(t, []error{nil}, errs)
		assert.Equal(t, [][]bool{{true, false, true}}, renewed)
		end, _ := do("HGET", "g", ab[0]+":o:1:expire_time").AsInt64()
		assert.InDelta(t, time.Now().Add(time.Hour).UnixMilli(), end, 5000)
		pttl, _ := do("PTTL", "g").AsInt64()
		assert.Greater(t, pttl, int64(59*60*1000))

		vals, err := scripts.GroupInspect(ctx, rdb, "g", append(ab, "nobody"))
		require.NoError(t, err)
		assert.Equal(t, "o:1", vals[0].Holder)
		assert.Equal(t, int64(2), vals[0].Count)
		assert.InDelta(t, time.Hour, vals[0].Left, float64(5*time.Second))
		assert.Equal(t, scripts.GroupValue{}, vals[2])

		assert.Equal(t, scripts.StillHeld, release("o:1", ab))
		assert.Equal(t, scripts.Freed, release("o:1", ab))
		for _, f := range ab {
			assert.Empty(t, hget(f))
			assert.Empty(t, hget(f+":o:1:lock_count"))
			assert.Empty(t, hget(f+":o:1:expire_time"))
		}
		require.True(t, acquire("o:3", scripts.GroupFields([]string{"b"}), time.Minute).OK, "b is free again")

		freed, err := scripts.GroupForceUnlock(ctx, rdb, "g", scripts.GroupFields([]string{"a", "b", "c"}), scripts.PublishClassic)
		require.NoError(t, err)
		assert.True(t, freed)
		n, _ := do("EXISTS", "g").AsInt64()
		assert.Zero(t, n, "every field gone, so the hash is")
	})
}

// A value whose holder's hold ended is taken over, and the old holder's
// fields go with it; the old holder can then neither release nor renew.
func TestGroupTakeOver(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		a := scripts.GroupFields([]string{"a"})
		_, err := scripts.GroupAcquire(ctx, rdb, scripts.Acquire{Key: "g", Owner: "o:1", Lease: time.Minute, Fields: a})
		require.NoError(t, err)
		do("HSET", "g", a[0]+":o:1:expire_time", "1") // ended long ago
		r, err := scripts.GroupAcquire(ctx, rdb, scripts.Acquire{Key: "g", Owner: "o:2", Lease: time.Minute, Fields: a})
		require.NoError(t, err)
		require.True(t, r.OK)
		keys, _ := do("HKEYS", "g").AsStrSlice()
		assert.ElementsMatch(t, []string{a[0], a[0] + ":o:2:expire_time", a[0] + ":o:2:lock_count"}, keys)
		res, err := scripts.GroupRelease(ctx, rdb, scripts.Release{Key: "g", Owner: "o:1", RequestID: "x",
			Lease: time.Minute, LatchTTL: time.Second, Fields: a})
		require.NoError(t, err)
		assert.Equal(t, scripts.NotHeld, res)
		renewed, errs := scripts.GroupRenew(ctx, rdb, time.Hour, [][]scripts.Held{{{Key: "g", Owner: "o:1", Fields: a}}})
		require.Equal(t, []error{nil}, errs)
		assert.Equal(t, [][]bool{{false}}, renewed)
	})
}
