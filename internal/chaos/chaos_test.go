package chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/reentrant"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" {
		runWorker(spec)
		return
	}
	goleak.VerifyTestMain(m)
}

// fault is one kind of fault the schedule can inject.
type fault struct {
	name  string
	apply func(r *run)
}

type run struct {
	t        *testing.T
	rng      *rand.Rand
	workload string
	redis    *redistest.Server
	proxies  []*proxy // one between each worker and redis
	workers  []*exec.Cmd
	clients  sync.Map // client id -> worker
	admin    *reentrant.Client
	log      []event
	target   int           // the worker the last pause-holder or partition-holder hit
	clock    time.Duration // Redis's clock, ahead of the workers' (behind: < 0)
}

// event is a fault as it happened, on CLOCK_MONOTONIC.
type event struct {
	name       string
	start, end int64
	worker     int // the worker hit, for pause-holder and partition-holder; -1 otherwise
}

// eachProxy applies a network fault to every worker's link.
func (r *run) eachProxy(f func(p *proxy)) {
	for _, p := range r.proxies {
		f(p)
	}
}

// holder returns the worker whose client holds the lock now, or a random
// one when that cannot be told.
func (r *run) holder() int {
	fields, err := r.redis.Do("HKEYS", lockName).AsStrSlice()
	if err == nil {
		for _, f := range fields {
			if len(f) >= 36 {
				if w, ok := r.clients.Load(f[:36]); ok {
					return w.(int)
				}
			}
		}
	}
	return r.rng.IntN(len(r.workers))
}

// forceUnlock releases the workload's lock as an operator would.
func (r *run) forceUnlock() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	switch r.workload {
	case "fair":
		r.admin.FairLock(lockName).ForceUnlock(ctx)
	case "priority":
		r.admin.PriorityLock(lockName).ForceUnlock(ctx)
	case "rw":
		r.admin.ReadWriteLock(lockName).WriteLock().ForceUnlock(ctx)
	default:
		r.admin.Lock(lockName).ForceUnlock(ctx)
	}
}

var faults = []fault{
	{name: "pause-holder", apply: func(r *run) {
		// Longer than the TTL: the lock expires under the paused process.
		r.target = r.holder()
		p := r.workers[r.target].Process
		p.Signal(syscall.SIGSTOP)
		time.Sleep(timeout + time.Duration(r.rng.IntN(400))*time.Millisecond)
		p.Signal(syscall.SIGCONT)
	}},
	{name: "pause-redis", apply: func(r *run) {
		r.redis.Pause()
		time.Sleep(time.Duration(50+r.rng.IntN(300)) * time.Millisecond)
		r.redis.Resume()
	}},
	{name: "kill-restart-redis", apply: func(r *run) {
		// appendfsync always: the restarted server keeps every write.
		r.redis.Kill()
		r.redis.Restart()
	}},
	{name: "script-flush", apply: func(r *run) { r.redis.Do("SCRIPT", "FLUSH") }},
	{name: "client-kill", apply: func(r *run) { r.redis.Do("CLIENT", "KILL", "TYPE", "normal") }},
	{name: "client-kill-pubsub", apply: func(r *run) { r.redis.Do("CLIENT", "KILL", "TYPE", "pubsub") }},
	{name: "delete-key", apply: func(r *run) { r.redis.Do("DEL", lockName) }},
	{name: "force-unlock", apply: func(r *run) { r.forceUnlock() }},
	{name: "client-pause", apply: func(r *run) {
		ms := 50 + r.rng.IntN(300)
		r.redis.Do("CLIENT", "PAUSE", strconv.Itoa(ms))
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}},
	{name: "latency", apply: func(r *run) {
		d := time.Duration(5+r.rng.IntN(60)) * time.Millisecond
		r.eachProxy(func(p *proxy) { p.setLatency(d) })
		time.Sleep(time.Duration(200+r.rng.IntN(800)) * time.Millisecond)
		r.eachProxy(func(p *proxy) { p.setLatency(0) })
	}},
	{name: "blackhole", apply: func(r *run) {
		var lifts []func()
		r.eachProxy(func(p *proxy) { lifts = append(lifts, p.blackhole()) })
		time.Sleep(time.Duration(100+r.rng.IntN(900)) * time.Millisecond)
		for _, lift := range lifts {
			lift()
		}
	}},
	{name: "partition-holder", apply: func(r *run) {
		// The holder's renewal replies come late (100-250ms each way, so
		// a deadline counted from the reply would outlast the key), then
		// its link goes dark for longer than the TTL while the others go
		// on: it must stop believing at the deadline counted from the
		// last confirmed renewal's send, before another can take the lock.
		r.target = r.holder()
		p := r.proxies[r.target]
		p.setLatency(time.Duration(100+r.rng.IntN(150)) * time.Millisecond)
		time.Sleep(time.Duration(300+r.rng.IntN(300)) * time.Millisecond)
		lift := p.blackhole()
		time.Sleep(time.Duration(700+r.rng.IntN(500)) * time.Millisecond)
		p.setLatency(0)
		lift()
	}},
	{name: "reset", apply: func(r *run) { r.eachProxy(func(p *proxy) { p.reset() }) }},
	{name: "lose-reply", apply: func(r *run) { r.proxies[r.rng.IntN(len(r.proxies))].loseReply() }},
	{name: "data-loss", apply: func(r *run) { r.redis.RestartEmpty() }},
	// Redis's wall clock, which its expiries and the tokens' floor follow,
	// jumps forward (holds end early, unknown to their holders until a
	// renewal finds them gone) or steps back (keys outlive their TTL), by
	// TTL/2 to 2 TTLs; and steps back as Redis comes back without its data.
	{name: "clock-forward", apply: func(r *run) { r.shiftClock(1) }},
	{name: "clock-back", apply: func(r *run) { r.shiftClock(-1) }},
	{name: "clock-back-data-loss", apply: func(r *run) { r.redis.RestartEmpty(); r.shiftClock(-1) }},
}

// Redis's clock stays within [clockLowest, 0] of the workers': never ahead
// of them, so a token drawn after a data loss starts at least at the
// drawing worker's clock, past every token before it (tokenlib.lua). A
// clock ahead of the clients' and then set back across a loss can draw a
// token below an older one; that case is the store's to catch, with
// fence.TokenPast (docs/fencing.md), and is tested there.
const (
	clockStart  = -4 * timeout
	clockLowest = -8 * timeout
)

// shiftClock moves Redis's clock by TTL/2 to 2 TTLs in direction dir (+1
// forward, -1 back), as far as [clockLowest, 0] allows.
func (r *run) shiftClock(dir int) {
	d := timeout/2 + time.Duration(r.rng.Int64N(int64(3*timeout/2)+1))
	r.clock = min(max(r.clock+time.Duration(dir)*d, clockLowest), 0)
	r.redis.ShiftClock(r.clock)
}

// inherent are the faults under which no lease-based lock can keep
// exclusion: a holder paused through its lease, and Redis forgetting or
// dropping a held lock behind its holder's back. Under every other fault
// the lock history must be linearizable.
var inherent = []string{"pause-holder", "delete-key", "data-loss", "force-unlock", "clock-forward", "clock-back-data-loss"}

// unfit are the faults a workload does not get: losing a semaphore's or a
// latch's keys loses its count, which no holder can notice or repair (the
// semaphore would have no permits, a latch would open), and they have no
// lock to force-unlock.
var unfit = map[string][]string{
	"semaphore": {"delete-key", "data-loss", "force-unlock", "clock-back-data-loss"},
	"latch":     {"data-loss", "clock-back-data-loss"},
}

// TestChaosAllFaults injects every fault and checks oracles A, B, D, E and
// F, for each workload.
func TestChaosAllFaults(t *testing.T) { eachWorkload(t, false) }

// TestChaosLinearizable injects every fault but the inherent ones and checks
// oracle C, the linearizability of the lock history, besides the others.
func TestChaosLinearizable(t *testing.T) { eachWorkload(t, true) }

// eachWorkload runs the suite once per workload: RELOCK_CHAOS_WORKLOADS
// (comma-separated) picks some; default all but the herd, whose 16
// processes have a command of their own (docs/safety.md).
func eachWorkload(t *testing.T, linearizable bool) {
	if os.Getenv("RELOCK_CHAOS") != "1" {
		t.Skip("set RELOCK_CHAOS=1 to run the fault-injection suite")
	}
	chosen := slices.DeleteFunc(slices.Clone(workloads), func(w string) bool { return w == "herd" })
	if s := os.Getenv("RELOCK_CHAOS_WORKLOADS"); s != "" {
		chosen = strings.Split(s, ",")
	}
	for _, w := range chosen {
		require.Contains(t, workloads, w, "RELOCK_CHAOS_WORKLOADS")
		t.Run(w, func(t *testing.T) { chaos(t, w, linearizable) })
	}
}

// chaos runs workers taking workload's lock under a seeded schedule of
// faults, without the inherent ones when linearizable is set, and judges
// the history. RELOCK_CHAOS_SEED replays a run; RELOCK_CHAOS_ACQUISITIONS
// sets the acquisitions per worker of 4 (default 5000; the herd's 16
// workers take a quarter of that each, for the same total);
// RELOCK_CHAOS_GAP the mean time between faults (default 50ms, drawn from
// 0.4x to 1.6x); RELOCK_CHAOS_BUDGET how long the run may take (default
// 15m: the latch workload waits out each round whose count-down reply was
// lost, and a loaded machine makes those rounds many).
func chaos(t *testing.T, workload string, linearizable bool) {
	var enabled []fault
	for _, f := range faults {
		if !slices.Contains(unfit[workload], f.name) && !(linearizable && slices.Contains(inherent, f.name)) {
			enabled = append(enabled, f)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RELOCK_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	perWorker := 5000
	if s := os.Getenv("RELOCK_CHAOS_ACQUISITIONS"); s != "" {
		perWorker, _ = strconv.Atoi(s)
	}
	gap := durationEnv(t, "RELOCK_CHAOS_GAP", 50*time.Millisecond)
	budget := durationEnv(t, "RELOCK_CHAOS_BUDGET", 15*time.Minute)
	workers := workersOf(workload)
	perWorker = perWorker * 4 / workers // every workload makes the same total
	if workload == "latch" {
		// But the latch's rounds: a round whose count-down reply was lost
		// may never open, and is waited out (latchAwait), which made this
		// one workload as long as all the others together.
		perWorker = max(perWorker/4, 1)
	}
	switch workload {
	case "ordered":
		// And the two-lock workloads': each acquisition takes two locks,
		perWorker = max(perWorker/8, 1)
	case "deadlock":
		// and up to half of these end in a deadlock, each of which lasts
		// DeadlockTimeout at least.
		perWorker = max(perWorker/16, 1)
	case "stall":
		// And the stall's: one holder in eight keeps the lock a progress
		// deadline while the others wait.
		perWorker = max(perWorker/4, 1)
	}
	t.Logf("seed %d (replay with RELOCK_CHAOS_SEED=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d", seed)
		}
	}()

	r := &run{t: t, rng: rand.New(rand.NewPCG(seed, seed>>1)), workload: workload,
		redis: redistest.StartClocked(t, "--appendonly", "yes", "--appendfsync", "always"), clock: clockStart}
	r.redis.ShiftClock(r.clock)
	for range workers {
		p, err := newProxy(r.redis.Addr)
		require.NoError(t, err)
		r.proxies = append(r.proxies, p)
		defer p.close()
	}
	admin, err := reentrant.New(r.redis.Client(), reentrant.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	r.admin = admin
	defer admin.Close()
	switch workload {
	case "semaphore":
		_, err := admin.PermitExpirableSemaphore(lockName).TrySetPermits(context.Background(), semPermits)
		require.NoError(t, err)
	case "latch":
		for k := 1; k <= perWorker; k++ {
			_, err := admin.CountDownLatch(latchName(k)).TrySetCount(context.Background(), int64(workers))
			require.NoError(t, err)
		}
	}
	var leaders *electionWatch
	if workload == "election" {
		leaders = watchElection(admin, r.redis.Client())
		defer func() { leaders.cancel(); <-leaders.done }()
	}
	var samples *queueSamples
	var drops *dropWatch
	if q, ok := queueWatches[workload]; ok {
		samples = sampleQueue(r.redis.Client(), q)
		defer samples.stop()
		drops = watchDrops(r.redis.Addr, q)
		defer drops.stop()
	}

	st := &store{}
	socket := filepath.Join(t.TempDir(), "store.sock")
	l, err := net.Listen("unix", socket)
	require.NoError(t, err)
	srv := &http.Server{Handler: st}
	go srv.Serve(l)
	defer srv.Close()

	var mu sync.Mutex
	var intervals []interval
	var ops []op
	var gates []gate
	var sums []summary
	var voided []int64
	var wg sync.WaitGroup
	exits := make([]error, workers)
	for id := 0; id < workers; id++ {
		cmd, sc := r.startWorker(id, fmt.Sprintf("%s=%d|%s|%s|%d|%d|%s", workerEnv, id, r.proxies[id].addr(), socket, perWorker, seed, workload))
		r.workers = append(r.workers, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc.Scan() {
				var rec record
				if json.Unmarshal(sc.Bytes(), &rec) != nil {
					continue
				}
				mu.Lock()
				switch {
				case rec.Interval != nil:
					intervals = append(intervals, *rec.Interval)
				case rec.Op != nil:
					ops = append(ops, *rec.Op)
				case rec.Gate != nil:
					gates = append(gates, *rec.Gate)
				case rec.Summary != nil:
					sums = append(sums, *rec.Summary)
				case rec.Voided != 0:
					voided = append(voided, rec.Voided)
				}
				mu.Unlock()
			}
			exits[id] = cmd.Wait()
		}()
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.After(budget)
schedule:
	for {
		select {
		case <-done:
			break schedule
		case <-deadline:
			t.Fatalf("the run did not finish within %v", budget)
		case <-time.After(gap*2/5 + time.Duration(r.rng.Int64N(int64(gap*6/5)+1))):
		}
		f := enabled[r.rng.IntN(len(enabled))]
		ev := event{name: f.name, start: mono(), worker: -1}
		f.apply(r)
		ev.end = mono()
		if f.name == "pause-holder" || f.name == "partition-holder" {
			ev.worker = r.target
		}
		r.log = append(r.log, ev)
	}
	var lost []int64
	r.eachProxy(func(p *proxy) { lost = append(lost, p.lostReplies()...) })
	slices.Sort(lost)
	if dir := os.Getenv(traceEnv); dir != "" {
		r.writeTrace(dir, intervals, ops, lost, voided)
	}

	// Oracle A: fencing.
	total := 0
	errs := map[string]int{}
	cancelled := 0
	for _, s := range sums {
		total += s.Acquired
		cancelled += s.Cancelled
		assert.Empty(t, s.Leaked, "oracle D: goroutines left in a worker after Close")
		for k, v := range s.Errors {
			errs[k] += v
		}
	}
	require.Len(t, sums, workers, "every worker finished; their exits: %v", exits)
	faultCount := map[string]int{}
	for _, ev := range r.log {
		faultCount[ev.name]++
	}
	t.Logf("%s: %d acquisitions, %d faults %v, %d waits cancelled at random; %d script replies lost; worker errors %v",
		workload, total, len(r.log), faultCount, cancelled, len(lost), errs)
	t.Logf("store: %d writes accepted, %d stale reads or writes refused, %d lost updates, value %d", st.accepted, st.stale, st.lost, st.value)
	assert.Zero(t, errs["reentry"], "ErrReentry for an owner made for one acquisition")
	assert.Zero(t, errs["stall late"], "a stalled hold not ended within its progress deadline and 5s")
	assert.Zero(t, errs["stall cause"], "a stalled hold ended with another cause than ErrStalled or ErrLockLost")
	// Only a fenced lock (an election's term is its token) can keep a store safe from a holder that lost its
	// lock without knowing (the inherent faults); without those faults
	// every lock must.
	if workload == "fenced" || workload == "election" || workload == "stall" || linearizable {
		assert.Zero(t, st.lost, "oracle A: lost or duplicated increments")
		assert.Equal(t, st.accepted, st.value, "oracle A: every accepted write is one increment")
	}

	// Oracle T: tokens only grow: an acquisition that began after another
	// had returned its token drew a larger one, through data losses and a
	// clock stepped back (tokenlib.lua's floors).
	tokensGrow(t, intervals)

	// Oracle B: overlaps between processes. An overlap is inherent only
	// when one side is a holder that could not know better: paused through
	// its lease, or holding when Redis forgot its lock (key deleted, data
	// lost). Even then its interval must end within one renewal period of
	// the fault.
	slices.SortFunc(intervals, func(a, b interval) int { return int(a.Start - b.Start) })
	var inherent, unexplained int
	for i, a := range intervals {
		for _, b := range intervals[i+1:] {
			if b.Start >= a.End {
				break
			}
			if a.Worker == b.Worker || (a.Read && b.Read) || b.End <= b.Start {
				continue // read holds share the lock; b never believed it held
			}
			if r.explained(a) || r.explained(b) {
				inherent++
			} else {
				unexplained++
				t.Errorf("oracle B: unexplained overlap: %+v and %+v; faults near it: %s", a, b, r.near(b.Start))
			}
		}
	}
	// One renewal period, plus slack for a reconnect (after a restart) and
	// a round trip; the local deadline (0.9 TTL after the last confirmed
	// renewal was sent) comes later, so a holder told only by it is late.
	// It is counted from the fault's end, or from when the holder began to
	// believe it held, if that came later: a reply or a grant's message
	// that arrives after the fault ended cannot be told of it sooner. Time
	// in which a later fault held the holder's replies up does not count:
	// the renewal that tells cannot come back sooner.
	late := 0
	held := r.heldUp()
	for _, x := range intervals {
		ev, ok := r.blame(x)
		if !ok {
			continue
		}
		from := max(ev.end, x.Start)
		if told := uncovered(held[processOf(r.workload, x.Worker)], from, x.End); told > int64(timeout/3+200*time.Millisecond) {
			late++
			t.Errorf("holder told %v after %s ended (or after its hold began), %v of it with its replies not held up by faults, more than one renewal period: %+v",
				time.Duration(x.End-from), ev.name, time.Duration(told), x)
		}
	}
	t.Logf("oracle B: %d overlapping pairs, each with a holder paused through its lease or whose lock Redis forgot, told within one renewal period; %d unexplained; %d told late",
		inherent, unexplained, late)

	// Oracle S: never more permits in use than the semaphore has, counting
	// only holders that could know (as oracle B).
	if workload == "semaphore" {
		r.permitsInUse(intervals)
	}
	// Oracle L: no latch opens early; every round whose count-downs all
	// succeeded opens for everyone.
	if workload == "latch" {
		r.latchRounds(gates, workers, perWorker)
	}

	// Oracle E: no wait longer than the holds and faults explain; with two
	// locks that deadlock, oracle G instead.
	switch workload {
	case "deadlock":
		r.deadlocks(ops, lost)
	case "ordered":
		r.liveness(intervals, ops, lost)
		r.deadlocks(ops, lost)
	default:
		r.liveness(intervals, ops, lost)
	}

	// Oracle F: the fair and priority locks serve live waiters in queue
	// order.
	if samples != nil {
		r.fairOrder(samples.stop(), drops.stop(), intervals, slices.Sorted(slices.Values(append(slices.Clone(lost), voided...))))
	}

	// Oracle C: with benign faults only, the history of lock calls is
	// linearizable against a mutex that allows unknown outcomes. Read holds
	// share the lock, which a mutex does not: not for the read-write lock.
	if linearizable && workload != "rw" && workload != "semaphore" && workload != "latch" {
		start := time.Now()
		unknown, longest := 0, int64(0)
		for _, o := range ops {
			if o.Ret == math.MaxInt64 {
				unknown++
			} else {
				longest = max(longest, o.Ret-o.Call)
			}
		}
		res, info := porcupine.CheckOperationsVerbose(mutexModel.ToModel(), history(ops), 3*time.Minute)
		t.Logf("oracle C: %d operations (%d with unknown outcomes, longest known %v), porcupine %v in %v",
			len(ops), unknown, time.Duration(longest), res, time.Since(start).Round(time.Millisecond))
		if res != porcupine.Ok {
			path := filepath.Join(os.TempDir(), fmt.Sprintf("relock-chaos-%d.html", seed))
			if err := porcupine.VisualizePath(mutexModel.ToModel(), info, path); err == nil {
				t.Logf("oracle C: history drawn in %s", path)
			}
		}
		assert.Equal(t, porcupine.Ok, res, "oracle C: the lock history is not linearizable")
	}

	// Oracle D: once a TTL has passed (an acquire whose reply was lost may
	// have left a hold, unrenewed), nothing is left but the token counter,
	// an election's record, and keys that expire by themselves (see expiring), and no channel is
	// subscribed.
	// A permit whose acquire reply was lost, and whose undo could not reach
	// Redis either, stays in the timeout set, expired, until a script
	// reclaims it, as in Redisson: count the permits (which reclaims) before
	// listing the keys. A priority waiter that could not leave (cut off,
	// its leave's reply lost) keeps its record, and the queue's keys their
	// TTL, for its alive window, max(WatchdogTimeout, 3 × RepollInterval):
	// longer than a TTL.
	// The clock set to the workers' (forward, never back: see clockLowest),
	// so that no key outlives its TTL for a clock stepped back.
	r.redis.ShiftClock(0)
	wait := timeout
	if workload == "priority" {
		wait = max(timeout, 3*repoll)
	}
	time.Sleep(wait)
	if workload == "semaphore" {
		// A fault may have killed the admin client's pooled connection: the
		// first send on it can fail with EOF, and a count is safe to send
		// again.
		var available, taken int64
		var err error
		for try := 0; try < 3; try++ {
			if available, taken, err = admin.PermitExpirableSemaphore(lockName).Permits(context.Background()); err == nil {
				break
			}
		}
		require.NoError(t, err)
		assert.Equal(t, [2]int64{semPermits, 0}, [2]int64{available, taken}, "oracle D: every permit back (available, taken)")
	}
	if leaders != nil {
		leaders.judge(t, r, intervals)
	}
	keys, err := r.do("KEYS", "*").AsStrSlice()
	require.NoError(t, err)
	for _, k := range keys {
		switch {
		case k == "redisson_lock_token:{chaos}",
			workload == "semaphore" && k == lockName,
			// An election keeps its last term on record (relock_election:{name}).
			workload == "election" && k == "relock_election:{chaos}",
			// Its roll keeps the entries of candidates killed while they
			// stood (their registrations expire) until the next stands.
			workload == "election" && k == "relock_election_candidates:{chaos}",
			workload == "latch" && strings.HasPrefix(k, "chaos:latch:"),
			// A lock of a crowded lane's own, given up on: its lease ends.
			workload == "crowded" && strings.HasPrefix(k, "chaos:crowd:") && r.expires(k),
			expiring(k) && r.expires(k):
		default:
			t.Errorf("oracle D: key %q left behind", k)
		}
	}
	chans, err := r.do("PUBSUB", "CHANNELS").AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, chans, "oracle D: no channel left subscribed")
}

// startWorker starts worker process id with env and returns it, with its
// output, once it has announced its client. The schedule injects no fault
// before every worker has, and a worker that exits or hangs before that is
// the harness's failure, not the library's: it is started again (three
// tries), so that no run goes on with fewer workers than it should.
func (r *run) startWorker(id int, env string) (*exec.Cmd, *bufio.Scanner) {
	for try := 1; ; try++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), env)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		require.NoError(r.t, err)
		require.NoError(r.t, cmd.Start())
		r.t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill() })
		hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		sc := bufio.NewScanner(out)
		var rec record
		announced := sc.Scan() && json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Client != ""
		hung.Stop()
		if announced {
			r.clients.Store(rec.Client, id)
			return cmd, sc
		}
		cmd.Process.Kill()
		err = cmd.Wait()
		require.Less(r.t, try, 3, "worker %d did not start: %v", id, err)
		r.t.Logf("worker %d did not start (%v); starting it again", id, err)
	}
}

// do runs an admin command, again if a fault broke the admin connection.
func (r *run) do(args ...string) rueidis.RedisResult {
	var res rueidis.RedisResult
	for try := 0; try < 5; try++ {
		if res = r.redis.Do(args...); !isConnError(res.Error()) {
			break
		}
	}
	return res
}

func isConnError(err error) bool {
	_, isReply := rueidis.IsRedisErr(err)
	return err != nil && !isReply
}

// heldUp returns, for each worker, the spans in which faults held its
// replies up: Redis paused, restarting or slowed for everyone, the
// worker's own link dark or slow, or the worker paused; and a renewal
// period after each reply the worker lost, which a renewal waits out
// before it is sent again.
func (r *run) heldUp() [][]span {
	all := []string{"pause-redis", "client-pause", "kill-restart-redis", "data-loss", "latency", "blackhole"}
	own := []string{"partition-holder", "pause-holder"}
	held := make([][]span, len(r.proxies))
	for w := range held {
		var spans []span
		for _, ev := range r.log {
			if slices.Contains(all, ev.name) || (slices.Contains(own, ev.name) && ev.worker == w) {
				spans = append(spans, span{ev.start, ev.end})
			}
		}
		for _, at := range r.proxies[w].lostReplies() {
			spans = append(spans, span{at, at + int64(timeout/3)})
		}
		held[w] = merge(spans)
	}
	return held
}

// expires reports whether key k has a TTL, or is gone already.
func (r *run) expires(k string) bool {
	ms, err := r.do("PTTL", k).AsInt64()
	return err == nil && (ms > 0 || ms == -2)
}

// expiring reports whether k is a key that expires by itself, with a TTL
// its writers renew, and that a fault may leave behind: an unlock latch,
// the set of relock clients waiting with directed wakes and their handoff
// offers (a client's offer goes with its registration), a deadlock
// check's edge (see reentrant's deadlock.go), and the guard of an attempt
// given up on in flight (scripts.Abandon).
func expiring(k string) bool {
	for _, prefix := range []string{"redisson_unlock_latch:", "relock_waiters:", "relock_grants:", "relock_wait:", "relock_abandoned:", "relock_election_candidate:"} {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// near lists the faults within a second of t, with their offsets from t.
func (r *run) near(t int64) string {
	var out []string
	for _, ev := range r.log {
		if ev.end >= t-int64(time.Second) && ev.start <= t+int64(time.Second) {
			hit := ""
			if ev.worker >= 0 {
				hit = fmt.Sprintf("@%d", ev.worker)
			}
			out = append(out, fmt.Sprintf("%s%s[%v..%v]", ev.name, hit, time.Duration(ev.start-t), time.Duration(ev.end-t)))
		}
	}
	return strings.Join(out, " ")
}

func durationEnv(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, name)
	return d
}

// blame returns the inherent fault that interval x lived through: a pause
// of x's own worker, or Redis forgetting the lock (key deleted, data lost)
// while x held it. The
// hold may exist from the moment its acquire was sent, before Lock returned.
func (r *run) blame(x interval) (event, bool) {
	// Faults run one after another, so the log is sorted by start and by
	// end: skip to the first that ended after x's acquire was sent.
	i, _ := slices.BinarySearchFunc(r.log, x.Sent, func(ev event, t int64) int { return cmp.Compare(ev.end, t) })
	for _, ev := range r.log[i:] {
		if ev.start > x.End {
			break
		}
		switch {
		case ev.name == "pause-holder" && ev.worker == processOf(r.workload, x.Worker) && x.Sent <= ev.end && x.End >= ev.start:
			return ev, true
		case slices.Contains(forgets, ev.name) && x.Sent <= ev.end && x.End >= ev.start:
			return ev, true
		}
	}
	return event{}, false
}

// forgets are the faults by which Redis drops a held lock behind its
// holder's back.
var forgets = []string{"delete-key", "data-loss", "force-unlock", "clock-forward", "clock-back-data-loss"}

func (r *run) explained(x interval) bool {
	_, ok := r.blame(x)
	return ok
}

// permitsInUse is oracle S: at no moment do more than semPermits holders
// that could know believe they hold a permit. Holders paused through their
// lease are left out, as oracle B leaves them out.
func (r *run) permitsInUse(intervals []interval) {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	excused := 0
	for _, x := range intervals {
		if x.End <= x.Start {
			continue
		}
		if r.explained(x) {
			excused++
			continue
		}
		edges = append(edges, edge{x.Start, 1}, edge{x.End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { // ends before starts at one instant
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
	})
	inUse, most := 0, 0
	for _, e := range edges {
		inUse += e.delta
		if inUse > semPermits {
			r.t.Errorf("oracle S: %d permits in use at %d; faults near: %s", inUse, e.at, r.near(e.at))
		}
		most = max(most, inUse)
	}
	r.t.Logf("oracle S: at most %d of %d permits in use; %d holds excused (paused through their lease)", most, semPermits, excused)
}

// writeTrace writes the run's faults and history beside the workers'
// traces (see traceEnv), in their line format.
func (r *run) writeTrace(dir string, intervals []interval, ops []op, lost, voided []int64) {
	t, err := newTracer(dir, -1)
	require.NoError(r.t, err)
	defer t.close()
	for _, ev := range r.log {
		t.line(ev.start, ev.end, "fault %s worker=%d", ev.name, ev.worker)
	}
	for _, x := range intervals {
		t.line(x.Start, x.End, "interval %+v", x)
	}
	for _, o := range ops {
		t.line(o.Call, o.Ret, "op %+v", o)
	}
	for _, at := range lost {
		t.line(at, 0, "lost-reply")
	}
	for _, at := range voided {
		t.line(at, 0, "voided")
	}
}

// tokensGrow is oracle T: for the fenced lock and the election, whose
// intervals carry tokens, every interval whose acquire was sent after
// another's had returned drew a larger token.
func tokensGrow(t *testing.T, intervals []interval) {
	var fenced []interval
	for _, x := range intervals {
		if x.Token > 0 {
			fenced = append(fenced, x)
		}
	}
	if len(fenced) == 0 {
		return
	}
	byStart := slices.SortedFunc(slices.Values(fenced), func(a, b interval) int { return cmp.Compare(a.Start, b.Start) })
	bySent := slices.SortedFunc(slices.Values(fenced), func(a, b interval) int { return cmp.Compare(a.Sent, b.Sent) })
	var before interval // the largest token among those returned so far
	i, back := 0, 0
	for _, x := range bySent {
		for ; i < len(byStart) && byStart[i].Start < x.Sent; i++ {
			if byStart[i].Token > before.Token {
				before = byStart[i]
			}
		}
		if before.Token >= x.Token {
			back++
			if back <= 3 {
				t.Errorf("oracle T: token %d drawn after token %d had been: %+v after %+v", x.Token, before.Token, x, before)
			}
		}
	}
	t.Logf("oracle T: %d tokens, %d drawn at or below one drawn before", len(fenced), back)
}
