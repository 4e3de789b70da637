package scripts_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/scripts"
)

// relock's fair scripts and the Redisson-protocol peer (which replays
// RedissonFairLock's scripts from its Java source) run the same steps on
// two locks; after each step both queues hold the same waiters in the same
// order with the same deadlines, and both replies agree. Deadlines are
// absolute milliseconds, Redis's clock on one side and the local clock on
// the other: on one machine they differ by the few milliseconds between
// the two calls.
func TestFairMatchesRedisson(t *testing.T) {
	each(t, func(t *testing.T, rdb scripts.Conn, do func(...string) rueidis.RedisResult) {
		ctx := context.Background()
		java := redissontest.New(rdb.Client)
		requests := 0
		const long, short = 300 * time.Second, 5 * time.Second
		type side struct {
			name    string
			acquire func(tid int64, turn time.Duration, join bool) (bool, int64)
			leave   func(tid int64, turn time.Duration)
			release func(tid int64) bool
		}
		relock := side{
			name: "go",
			acquire: func(tid int64, turn time.Duration, join bool) (bool, int64) {
				r, err := scripts.FairAcquire(ctx, rdb, scripts.Acquire{Key: "go", Owner: java.Owner(tid), Lease: 30 * time.Second,
					Turn: turn, Join: join, Publish: scripts.PublishClassic})
				require.NoError(t, err)
				return r.OK, r.PTTL.Milliseconds()
			},
			leave: func(tid int64, turn time.Duration) {
				require.NoError(t, scripts.FairLeave(ctx, rdb, "go", java.Owner(tid), turn, scripts.PublishClassic))
			},
			release: func(tid int64) bool {
				requests++
				r := scripts.Release{Key: "go", Owner: java.Owner(tid), RequestID: strconv.Itoa(requests), Lease: 30 * time.Second, LatchTTL: time.Millisecond, Publish: scripts.PublishClassic}
				got, err := scripts.FairRelease(ctx, rdb, r)
				require.NoError(t, err)
				return got != scripts.NotHeld
			},
		}
		redisson := side{
			name: "java",
			acquire: func(tid int64, turn time.Duration, join bool) (bool, int64) {
				ok, ttl, err := java.FairTryAcquire(ctx, "java", tid, turn, join)
				require.NoError(t, err)
				return ok, ttl
			},
			leave: func(tid int64, turn time.Duration) {
				require.NoError(t, java.FairAcquireFailed(ctx, "java", tid, turn))
			},
			release: func(tid int64) bool {
				held, err := java.FairUnlock(ctx, "java", tid)
				require.NoError(t, err)
				return held
			},
		}
		state := func(name string) ([]string, []float64) {
			q, err := do("LRANGE", scripts.FairQueue(name), "0", "-1").AsStrSlice()
			require.NoError(t, err)
			var dl []float64
			for _, o := range q {
				f, err := do("ZSCORE", scripts.FairTimeouts(name), o).AsFloat64()
				require.NoError(t, err)
				dl = append(dl, f)
			}
			n, err := do("ZCARD", scripts.FairTimeouts(name)).AsInt64()
			require.NoError(t, err)
			require.Equal(t, int64(len(q)), n, "one deadline per queued waiter")
			return q, dl
		}
		same := func(step string) {
			t.Helper()
			gq, gd := state("go")
			jq, jd := state("java")
			require.Equal(t, jq, gq, "%s: queue", step)
			for i := range gd {
				assert.InDelta(t, jd[i], gd[i], 50, "%s: deadline of %s", step, gq[i])
			}
		}
		both := func(step string, f func(s side) any) {
			t.Helper()
			g, j := f(relock), f(redisson)
			if gt, ok := g.([2]int64); ok {
				jt := j.([2]int64)
				assert.Equal(t, jt[0], gt[0], "%s: acquired", step)
				assert.InDelta(t, jt[1], gt[1], 50, "%s: reply", step)
			} else {
				assert.Equal(t, j, g, "%s: reply", step)
			}
			same(step)
		}
		acquire := func(tid int64, turn time.Duration, join bool) func(s side) any {
			return func(s side) any {
				ok, ttl := s.acquire(tid, turn, join)
				return [2]int64{map[bool]int64{true: 1}[ok], ttl}
			}
		}
		both("holder takes it", acquire(100, long, true))
		both("holder again", acquire(100, long, true))
		both("1 joins", acquire(1, long, true))
		both("2 joins", acquire(2, long, true))
		both("3 joins with a 5s wait", acquire(3, short, true))
		both("4 joins", acquire(4, long, true))
		both("2 tries again, queued", acquire(2, long, true))
		both("5 tries once", acquire(5, long, false))
		both("2 gives up", func(s side) any { s.leave(2, long); return nil })
		both("3 gives up", func(s side) any { s.leave(3, short); return nil })
		both("holder releases once", func(s side) any { return s.release(100) })
		both("4 tries: not its turn yet", acquire(4, long, true))
		both("holder releases", func(s side) any { return s.release(100) })
		both("4 tries: 1's turn", acquire(4, long, true))
		both("1 takes its turn", acquire(1, long, true))
		both("6 joins", acquire(6, long, true))
		both("7 tries once", acquire(7, long, false))
		both("1 releases", func(s side) any { return s.release(1) })
		// 4's turn has come; it is taken for dead once its deadline
		// passes (moved here into the past), and 6 is next.
		for _, name := range []string{"go", "java"} {
			do("ZADD", scripts.FairTimeouts(name), "1", java.Owner(4))
		}
		both("6 takes the turn of dead 4", acquire(6, long, true))
		both("6 releases", func(s side) any { return s.release(6) })
		// The one reply that differs: releasing a lock that is gone,
		// Redisson answers 1 (released), relock nil (not held); both tell
		// the head, and nothing else changes.
		assert.False(t, relock.release(9), "relock: not held")
		assert.True(t, redisson.release(9), "Redisson: 1")
		same("a stranger releases a lock that is gone")
		for _, name := range []string{"go", "java"} {
			n, err := do("EXISTS", name, scripts.FairQueue(name), scripts.FairTimeouts(name)).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "%s: nothing left", name)
		}
	})
}
