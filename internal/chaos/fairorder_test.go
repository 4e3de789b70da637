package chaos

import (
	"bufio"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/scripts"
)

// queueSamples watches the fair lock's queue from outside the workers, on
// its own connection to Redis (no proxy, no network fault).
type queueSamples struct {
	once    sync.Once
	done    chan struct{}
	stopped chan struct{}
	seen    []queueSample
}

// queueSample is the queue as one read saw it: between at and after on
// CLOCK_MONOTONIC, at clock on Redis's (microseconds).
type queueSample struct {
	at, after int64
	clock     int64
	queue     []string
}

// readQueue reads Redis's clock and the queue in one script, so that a
// sample can be placed among the drops the monitor saw.
const readQueue = `local t = redis.call('time')
return {t[1] * 1000000 + t[2], redis.call(ARGV[1], KEYS[1], 0, -1)}`

// queueWatch is where a queued workload's queue is and how its scripts
// change it, as MONITOR shows their commands: a drop (a waiter taken out
// of the queue because its turn or its window ran out) is the command
// starting with drop and the waiter, then follow and the waiter; a grant
// (a release handing the lock to the waiter) is grant, the waiter and "0".
type queueWatch struct {
	key, read           string // the queue, and the command that reads it in order
	drop, follow, grant string
	// claimed: the waiter found its grant had run out (fairlib.lua's
	// claim: HEXISTS of the lock, then HDEL of the grant).
	claimed, unclaim string
}

// queueWatches are the queued workloads'.
var queueWatches = map[string]queueWatch{
	"fair": {
		key: "redisson_lock_queue:{" + lockName + "}", read: "lrange",
		drop:    `"zrem" "redisson_lock_timeout:{` + lockName + `}" "`,
		follow:  `"lpop" "redisson_lock_queue:{` + lockName + `}"`,
		grant:   `"hset" "relock_grants:{` + lockName + `}" "`,
		claimed: `"hexists" "` + lockName + `" "`,
		unclaim: `"hdel" "relock_grants:{` + lockName + `}" "`,
	},
	"priority": {
		key: "relock_priority_queue:{" + lockName + "}", read: "zrange",
		drop:   `"zrem" "relock_priority_queue:{` + lockName + `}" "`,
		follow: `"hdel" "relock_priority_waiters:{` + lockName + `}" "`,
		grant:  `"hset" "relock_priority_waiters:{` + lockName + `}" "`,
	},
}

// sampleQueue samples q's queue every 2ms until stop, keeping each change
// that has two waiters or more (order needs two).
func sampleQueue(rdb rueidis.Client, q queueWatch) *queueSamples {
	s := &queueSamples{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		key := q.key
		var last []string
		for {
			select {
			case <-s.done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			at := mono()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			reply, err := rdb.Do(ctx, rdb.B().Eval().Script(readQueue).Numkeys(1).Key(key).Arg(q.read).Build()).ToArray()
			cancel()
			if err != nil || len(reply) != 2 {
				continue
			}
			clock, err1 := reply[0].AsInt64()
			q, err2 := reply[1].AsStrSlice()
			if err1 != nil || err2 != nil || len(q) < 2 || slices.Equal(q, last) {
				continue
			}
			last = q
			s.seen = append(s.seen, queueSample{at, mono(), clock, q})
		}
	}()
	return s
}

// stop ends the sampling and returns the samples.
func (s *queueSamples) stop() []queueSample {
	s.once.Do(func() { close(s.done) })
	<-s.stopped
	return s.seen
}

// reorders are the faults after which the order in which waiters' Lock
// calls returned may legitimately differ from the queue's: those that may
// lose the reply of a waiter's winning attempt (the waiter undoes the grant
// and joins the queue again at its end), data-loss (it wipes the queue),
// and those that free the lock under its holder (delete-key, force-unlock:
// the next waiter is granted while the first one's reply is still on its
// way, so the two holds overlap and either Lock may return first).
var reorders = []string{"reset", "client-kill", "kill-restart-redis", "data-loss", "delete-key", "force-unlock"}

// fairOrder is oracle F: whenever the queue showed waiter a ahead of
// waiter b, and both went on, within the same wait, to take the lock, a
// took it first (its Lock returned first): order is kept among live
// waiters. A pair is excused when a's turn ran out after the sample and a
// script dropped it from the head of the queue (Redisson's rule: it joins
// again at the tail; drops, seen on the wire), or when one of these came
// between the sample and a's turn: a reorders fault; a lost reply (lost: its
// times, with those of replies that came after their hold had expired); a
// moment the monitor was not watching; a pause of a's own process (a may
// have been granted the lock first, its hold expiring under the pause
// before its Lock could return, and b granted next: Redis kept the order,
// the returns do not show it).
func (r *run) fairOrder(samples []queueSample, drops dropLog, intervals []interval, lost []int64) {
	turn := map[string]int64{}
	worker := map[string]int{}
	for _, x := range intervals {
		turn[x.Owner] = x.Start
		worker[x.Owner] = x.Worker
	}
	dropped := func(a string, s queueSample) bool {
		return slices.ContainsFunc(drops.of[a], func(at int64) bool { return at >= s.clock })
	}
	// lapsed: a release granted a the lock after the sample, and before b's
	// Lock returned (the sample places the grant on CLOCK_MONOTONIC, no
	// later than its read returned plus the time since on Redis's clock):
	// a's turn came first, and its grant ran out before a took it (a
	// grant's TTL is what is left of the lease a's last attempt asked for:
	// a delayed message can miss it), as a turn runs out. b cannot have
	// taken the lock before the grant: a was ahead of it, and the lock
	// was not free again until b's release, after b's Lock returned.
	lapsed := func(a, b string, s queueSample) bool {
		return slices.ContainsFunc(drops.granted[a], func(at int64) bool {
			return at >= s.clock && s.after+(at-s.clock)*1000 <= turn[b]
		})
	}
	excused := func(a string, from, to int64) bool {
		for _, ev := range r.log {
			if ev.end < from || ev.start > to {
				continue
			}
			if slices.Contains(reorders, ev.name) || (ev.name == "pause-holder" && ev.worker == worker[a]) {
				return true
			}
		}
		for _, b := range drops.blind {
			if b.to >= from && b.from <= to {
				return true
			}
		}
		i, _ := slices.BinarySearch(lost, from)
		return i < len(lost) && lost[i] <= to
	}
	pairs, bypassed, turnRanOut, excusedN := 0, 0, 0, 0
	for _, s := range samples {
		for i, a := range s.queue {
			ta, ok := turn[a]
			if !ok {
				continue
			}
			for _, b := range s.queue[i+1:] {
				tb, ok := turn[b]
				if !ok {
					continue
				}
				pairs++
				switch {
				case tb > ta:
				case dropped(a, s), lapsed(a, b, s):
					turnRanOut++
				case excused(a, s.at, ta):
					excusedN++
				default:
					bypassed++
					if bypassed <= 10 {
						r.t.Errorf("oracle F: %s was ahead of %s in the queue at %d but took the lock %v after it; faults near: %s",
							a, b, s.at, time.Duration(ta-tb), r.near(tb))
					}
				}
			}
		}
	}
	r.t.Logf("oracle F: %d queue samples, %d ordered pairs of waiters that took the lock, %d drops of a waiter whose turn ran out, %d grants; out of order: %d after the first one's turn ran out (or its grant), %d excused by a fault between, %d unexplained",
		len(samples), pairs, drops.count(), count(drops.granted), turnRanOut, excusedN, bypassed)
}

// dropWatch follows every command Redis runs (MONITOR, on a connection of
// its own, no proxy) and keeps each waiter that a fair-lock script dropped
// from the head of the queue because its turn had run out. fairlib.lua's
// dropExpired (Redisson's "remove stale threads") is the only code that
// runs ZREM on the deadlines and then LPOP on the queue: a grant pops
// first, and a waiter that leaves is removed with LREM. It counts as a
// drop too when a waiter finds that the grant a release gave it ran out
// before it took it (the grant lasts at least until that waiter's turn is
// over): fairlib.lua's claim then runs HEXISTS on the lock and HDEL of the
// grant, which no other script runs one after the other. And it keeps each
// grant (HSET of the grant's mark "0"): a grant is its waiter's turn, and
// when the waiter takes the lock after one behind it, the grant ran out
// before it took it (the grant's mark may be gone by its next attempt,
// with the grants' hash, so that no drop is seen).
type dropWatch struct {
	q       queueWatch
	addr    string
	done    chan struct{}
	stopped chan struct{}
	mu      sync.Mutex // guards conn, and log while the watch runs
	conn    net.Conn   // the live connection, closed by stop
	log     dropLog
}

// dropLog is what a dropWatch saw.
type dropLog struct {
	of map[string][]int64 // owner -> when it was dropped, on Redis's clock (µs)
	// granted: owner -> when a release granted it the lock, likewise.
	granted map[string][]int64
	// blind are the spans (CLOCK_MONOTONIC) when the monitor was not
	// connected: a fault killed its connection or Redis itself.
	blind []span
}

func (l dropLog) count() int { return count(l.of) }

// count counts the times in m.
func count(m map[string][]int64) (n int) {
	for _, at := range m {
		n += len(at)
	}
	return n
}

// watchDrops starts watching q's queue on Redis at addr.
func watchDrops(addr string, q queueWatch) *dropWatch {
	w := &dropWatch{q: q, addr: addr, done: make(chan struct{}), stopped: make(chan struct{}), log: dropLog{of: map[string][]int64{}, granted: map[string][]int64{}}}
	go w.run()
	return w
}

// grantSeen reports whether the watch has seen a grant to owner.
func (w *dropWatch) grantSeen(owner string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.log.granted[owner]) > 0
}

// stop ends the watch and returns what it saw.
func (w *dropWatch) stop() dropLog {
	w.mu.Lock()
	select {
	case <-w.done:
	default:
		close(w.done)
		if w.conn != nil {
			w.conn.Close()
		}
	}
	w.mu.Unlock()
	<-w.stopped
	return w.log
}

func (w *dropWatch) run() {
	defer close(w.stopped)
	blindFrom := mono()
	for {
		if conn, err := net.DialTimeout("tcp", w.addr, time.Second); err == nil {
			w.follow(conn, blindFrom)
			blindFrom = mono()
		}
		select {
		case <-w.done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// follow reads conn's monitor feed until it breaks; the monitor was blind
// from blindFrom until the feed started.
func (w *dropWatch) follow(conn net.Conn, blindFrom int64) {
	w.mu.Lock()
	select {
	case <-w.done:
		w.mu.Unlock()
		conn.Close()
		return
	default:
		w.conn = conn
	}
	w.mu.Unlock()
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		return
	}
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		return
	}
	w.log.blind = append(w.log.blind, span{blindFrom, mono()})
	q := w.q
	var owner string   // the waiter the command before dropped, if follow comes next
	var granted string // the waiter whose hold the command before looked for
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		at, cmd, ok := monitorLine(line)
		switch {
		case !ok:
			owner, granted = "", ""
		case strings.HasPrefix(cmd, q.drop):
			owner, granted = strings.TrimSuffix(strings.TrimPrefix(cmd, q.drop), `"`), ""
		case strings.HasPrefix(cmd, q.grant) && strings.HasSuffix(cmd, `" "0"`):
			g := strings.TrimSuffix(strings.TrimPrefix(cmd, q.grant), `" "0"`)
			w.mu.Lock()
			w.log.granted[g] = append(w.log.granted[g], at)
			w.mu.Unlock()
			owner, granted = "", ""
		case q.claimed != "" && strings.HasPrefix(cmd, q.claimed):
			owner, granted = "", strings.TrimSuffix(strings.TrimPrefix(cmd, q.claimed), `"`)
		case owner != "" && (cmd == q.follow || cmd == q.follow+owner+`"`), granted != "" && cmd == q.unclaim+granted+`"`:
			w.mu.Lock()
			w.log.of[owner+granted] = append(w.log.of[owner+granted], at)
			w.mu.Unlock()
			owner, granted = "", ""
		default:
			owner, granted = "", ""
		}
	}
}

// monitorLine splits a line of a script's command in the monitor feed,
// `+1795613798.369803 [0 lua] "lpop" "key"`, into the time in
// microseconds and the command.
func monitorLine(line string) (at int64, cmd string, ok bool) {
	stamp, rest, ok1 := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "+")), " ")
	_, cmd, ok2 := strings.Cut(rest, " lua] ")
	sec, usec, ok3 := strings.Cut(stamp, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	u, err2 := strconv.ParseInt(usec, 10, 64)
	if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil {
		return 0, "", false
	}
	return s*1_000_000 + u, cmd, true
}

// A waiter whose turn has run out is dropped from the head of the fair
// queue by the next script anyone runs, and its own next attempt joins it
// again at the tail: the one way a waiter ahead in the queue may, with no
// fault, take the lock after one behind it. The monitor sees that drop,
// and sees none in a grant or in a waiter leaving.
func TestTurnRanOutIsSeen(t *testing.T) {
	s := redistest.Start(t)
	w := watchDrops(s.Addr, queueWatches["fair"])
	defer w.stop()
	redistest.Eventually(t, 10*time.Second, "the monitor to follow", func() bool {
		list, _ := s.Do("CLIENT", "LIST").ToString()
		return strings.Contains(list, "cmd=monitor")
	})
	ctx := context.Background()
	c := scripts.Conn{Client: s.Client()}
	queue, timeouts := "redisson_lock_queue:{"+lockName+"}", "redisson_lock_timeout:{"+lockName+"}"
	clock := func() int64 {
		now, err := s.Do("TIME").AsStrSlice()
		require.NoError(t, err)
		sec, _ := strconv.ParseInt(now[0], 10, 64)
		usec, _ := strconv.ParseInt(now[1], 10, 64)
		return sec*1_000_000 + usec
	}
	acquire := func(owner string) (bool, error) {
		r, err := scripts.FairAcquire(ctx, c, scripts.Acquire{Key: lockName, Owner: owner, Lease: time.Minute,
			Turn: fairTurn, Join: true, Publish: scripts.PublishClassic})
		return r.OK, err
	}

	// late's turn ran out; early, behind it, still has its own.
	before := clock()
	s.Do("RPUSH", queue, "late", "early", "leaver")
	s.Do("ZADD", timeouts, strconv.FormatInt(before/1000-1, 10), "late", strconv.FormatInt(before/1000+60_000, 10), "early", strconv.FormatInt(before/1000+90_000, 10), "leaver")
	require.NoError(t, scripts.FairLeave(ctx, c, lockName, "leaver", fairTurn, scripts.PublishClassic))
	ok, err := acquire("early")
	require.NoError(t, err)
	assert.True(t, ok, "early takes the lock: late was dropped")
	ok, err = acquire("late")
	require.NoError(t, err)
	assert.False(t, ok)
	q, err := s.Do("LRANGE", queue, "0", "-1").AsStrSlice()
	require.NoError(t, err)
	assert.Equal(t, []string{"late"}, q, "late joined again, at the tail")

	// late, which takes grants, is handed the lock by early's release.
	_, err = scripts.FairAcquire(ctx, c, scripts.Acquire{Key: lockName, Owner: "late", Lease: time.Minute,
		Turn: fairTurn, Join: true, Publish: scripts.PublishClassic, GrantTry: 2})
	require.NoError(t, err)
	freed, err := scripts.FairRelease(ctx, c, scripts.Release{Key: lockName, Owner: "early", RequestID: "r", Lease: time.Minute,
		LatchTTL: time.Second, Publish: scripts.PublishClassic})
	require.NoError(t, err)
	require.Equal(t, scripts.Freed, freed)
	redistest.Eventually(t, 10*time.Second, "the monitor to see the grant", func() bool { return w.grantSeen("late") })

	seen := w.stop()
	require.Len(t, seen.of["late"], 1, "late's drop: %v", seen.of)
	assert.GreaterOrEqual(t, seen.of["late"][0], before)
	assert.Equal(t, 1, seen.count(), "no drop in early's grant or the leave: %v", seen.of)
	require.Len(t, seen.granted["late"], 1, "late's grant: %v", seen.granted)
	assert.Equal(t, 1, count(seen.granted), "no other grant: %v", seen.granted)
}
