package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/election"
	"github.com/relock-go/relock/scripts"
)

// interval is one acquisition as its process saw it: from Lock's return to
// the earliest of Unlock's start and the held context's cancellation, on
// CLOCK_MONOTONIC in nanoseconds.
type interval struct {
	Worker int    `json:"w"`
	Owner  string `json:"o"`
	Read   bool   `json:"rd,omitempty"` // a read hold of the read-write lock
	Sent   int64  `json:"a"`            // when the acquire that won was sent: the hold may exist from then
	Start  int64  `json:"s"`
	End    int64  `json:"e"`
	// Freed is when Unlock returned, having released the hold (the lock
	// was free from then on, and waiters told), or when a stalled hold's
	// held context was cancelled, as it was given back; 0 otherwise.
	Freed int64 `json:"f,omitempty"`
	Token int64 `json:"t"`
}

// op is one lock call as its process saw it, for the linearizability check
// (the acquisition it belongs to tells holds apart):
// Kind is "acquire", "release" or "lost" (the held context was cancelled
// with ErrLockLost); Out is "ok", "notheld" or "unknown" (an error that
// leaves the outcome open). Times are CLOCK_MONOTONIC.
type op struct {
	Worker int    `json:"w"`
	Acq    int64  `json:"q"` // the acquisition: unique across workers
	Kind   string `json:"k"`
	Call   int64  `json:"c"`
	Ret    int64  `json:"r"`
	Out    string `json:"o"`
	// Done is when a call whose outcome is unknown returned (its Ret is
	// left open for the linearizability check).
	Done int64 `json:"d,omitempty"`
}

// record is one line of a worker's output.
type record struct {
	Client   string    `json:"client,omitempty"` // the worker's client id, first
	Interval *interval `json:"iv,omitempty"`
	Op       *op       `json:"op,omitempty"`
	Gate     *gate     `json:"gate,omitempty"`
	Summary  *summary  `json:"sum,omitempty"`
	// Voided is when the library said a winning acquire's reply came after
	// the hold had expired: the waiter joins a fair queue again at its end,
	// as after a lost reply.
	Voided int64 `json:"void,omitempty"`
}

// voidedMsg is the library's warning of a reply that came after its hold's
// deadline; its attribute kept=false says the hold had not lived.
const voidedMsg = "relock: an acquire's reply came after its hold's deadline"

// voidWatch passes log records on, and reports each voided acquire.
type voidWatch struct {
	slog.Handler
	voided func()
}

func (v voidWatch) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == voidedMsg {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "kept" && !a.Value.Bool() {
				v.voided()
			}
			return true
		})
	}
	return v.Handler.Handle(ctx, r)
}

// summary is what a worker reports at the end.
type summary struct {
	Acquired  int            `json:"acquired"`
	Cancelled int            `json:"cancelled"` // waits given a short, random deadline
	Errors    map[string]int `json:"errors"`
	Leaked    string         `json:"leaked,omitempty"` // goroutines left after Close
}

func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Environment of a worker process.
const (
	workerEnv = "RELOCK_CHAOS_WORKER" // "id|redis addr|store socket|acquisitions|seed|workload"
	lockName  = "chaos"
	timeout   = 600 * time.Millisecond // watchdog timeout: renewal every 200ms
	repoll    = time.Second            // RepollInterval, the default
	// fairTurn is the fair lock's FairWaitTimeout: a waiter left in the
	// queue by a bug holds the others up this long, which the liveness
	// oracle sees.
	fairTurn = 3 * time.Second
	// pairName is the second lock of the deadlock and ordered workloads,
	// and deadlockTimeout their workers' DeadlockTimeout.
	pairName        = "chaos:pair"
	deadlockTimeout = 200 * time.Millisecond
)

// The workloads: which lock the workers take ("priority" at a random
// priority of four each time; "deadlock" takes the plain lock and
// pairName, one after the other in a random order, as the first one's
// owner, so that workers deadlock; "ordered" takes the two always in the
// same order, so that none may); "semaphore" takes a permit
// of a PermitExpirableSemaphore of semPermits; "latch" runs latch rounds
// (see runLatchWorker); "herd" is the plain lock with herdWorkers
// processes, most of them waiting at any time; "nonreentrant" is the
// non-reentrant lock, each acquisition a new owner, so that any
// ErrReentry is a defect; "group" takes values of the group lock
// lockName, a set of groupSets at random, of which any two overlap, so
// that each hold excludes every other as one lock's would; "election"
// campaigns in election lockName and resigns, its term fencing the store
// as the fenced lock's token does; "stall" takes the fenced lock with a
// progress deadline (reentrant.ProgressWithin, stallWithin), and one
// holder in stallEvery stops reporting and waits for its hold to be given
// back, then writes to the store again with its old token (see stall).
var workloads = []string{"fenced", "plain", "crowded", "nonreentrant", "rw", "fair", "priority", "deadlock", "ordered", "semaphore", "latch", "herd", "group", "election", "stall"}

// The stall workload's progress deadline, and how many of its holders
// stall: one in stallEvery.
const (
	stallWithin = 100 * time.Millisecond
	stallEvery  = 8
)

// progressing is a lock taken with the stall workload's progress deadline.
type progressing struct{ l *reentrant.Lock }

func (p progressing) Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error) {
	return p.l.Lock(ctx, append(opts, reentrant.ProgressWithin(stallWithin))...)
}

func (p progressing) Unlock(held context.Context) error { return p.l.Unlock(held) }

// groupSets are the group workload's value sets.
var groupSets = [][]string{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"a", "b", "c"}}

// workersOf returns how many worker processes workload w runs.
func workersOf(w string) int {
	if w == "herd" {
		return herdWorkers
	}
	return 4
}

const herdWorkers = 16

// lanesOf returns how many goroutines of each worker process take workload
// w's lock, each a worker of its own in the history: the crowded
// workload's 8 share their process's client, so their calls are coalesced
// (scripts.Coalescer), through every fault.
func lanesOf(w string) int {
	if w == "crowded" {
		return crowdLanes
	}
	return 1
}

const crowdLanes = 8

// processOf returns the worker process of lane (see lanesOf).
func processOf(w string, lane int) int { return lane / lanesOf(w) }

// semPermits is the size of the semaphore workload's semaphore.
const semPermits = 2

// permitLocker takes one permit as a locker: its held context is the
// permit's.
type permitLocker struct {
	s *reentrant.PermitExpirableSemaphore
	p *reentrant.Permit
}

func (l *permitLocker) Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error) {
	p, err := l.s.Acquire(ctx, opts...)
	if err != nil {
		return nil, err
	}
	l.p = p
	return p.Context(), nil
}

func (l *permitLocker) Unlock(context.Context) error { return l.p.Release(context.Background()) }

// prioritized takes a priority lock at priority p.
type prioritized struct {
	l *reentrant.Lock
	p int
}

func (l prioritized) Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error) {
	return l.l.Lock(ctx, append(opts, reentrant.Priority(l.p))...)
}

func (l prioritized) Unlock(ctx context.Context) error { return l.l.Unlock(ctx) }

// pair takes two locks as one owner, the second as the first's holder:
// lockName then pairName, or, swapped, the other way round. Its held
// context is lockName's. It records each wait for its second lock (op
// kind "second:"+the lock's name; out "ok", "deadlock" or "error").
type pair struct {
	first, second *reentrant.Lock
	swapped       bool
	emit          func(op)
	held          [2]context.Context
}

func (p *pair) Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error) {
	first, second := p.first, p.second
	if p.swapped {
		first, second = second, first
	}
	h1, err := first.Lock(ctx, opts...)
	if err != nil {
		return nil, err
	}
	call := mono()
	h2, err := second.Lock(h1, opts...)
	o := op{Kind: "second:" + second.Name(), Call: call, Ret: mono(), Out: "ok"}
	switch {
	case errors.Is(err, reentrant.ErrDeadlock):
		o.Out = "deadlock"
	case err != nil:
		o.Out = "error"
	}
	p.emit(o)
	if err != nil {
		first.Unlock(h1)
		return nil, err
	}
	p.held = [2]context.Context{h1, h2}
	if p.swapped {
		return h2, nil
	}
	return h1, nil
}

// Unlock gives back both holds, and returns lockName's release error.
func (p *pair) Unlock(context.Context) error {
	first, second := p.first, p.second
	if p.swapped {
		first, second = second, first
	}
	err2 := second.Unlock(p.held[1])
	err1 := first.Unlock(p.held[0])
	if p.swapped {
		return err2
	}
	return err1
}

// elected leads an election as a locker: its held context is the leading
// one, which carries the term as the fenced lock's token. Handovers are
// mixed in: one campaign in eight first asks the leader to resign (its
// leading context ends, and it hands over to the candidate standing
// longest), and one Resign in three hands over to that candidate directly.
type elected struct{ e *election.Election }

func (l elected) Lock(ctx context.Context, _ ...reentrant.LockOption) (context.Context, error) {
	if rand.IntN(8) == 0 {
		_, _ = l.e.RequestResign(ctx) // nobody leading, or Redis out of reach: no matter
	}
	leading, _, err := l.e.Campaign(ctx, "worker")
	return leading, err
}

func (l elected) Unlock(leading context.Context) error {
	if rand.IntN(3) == 0 {
		return l.e.Resign(leading, election.ToNext())
	}
	return l.e.Resign(leading)
}

// priorities is how many priorities the priority workload's waiters draw
// from, at random for each acquisition.
const priorities = 4

// locker takes and gives back one kind of lock.
type locker interface {
	Lock(ctx context.Context, opts ...reentrant.LockOption) (context.Context, error)
	Unlock(ctx context.Context) error
}

// pick returns the lock for the next acquisition of workload w, and
// whether it is a shared hold: the read-write workload reads 7 times in 10;
// permits are all shared (oracle S counts them).
func pick(c *reentrant.Client, rdb rueidis.Client, w string, rng *rand.Rand) (locker, bool) {
	switch w {
	case "election":
		return elected{election.New(c, lockName, election.Options{})}, false
	case "stall":
		return progressing{c.FencedLock(lockName)}, false
	case "semaphore":
		return &permitLocker{s: c.PermitExpirableSemaphore(lockName)}, true
	case "plain", "herd", "crowded":
		return c.Lock(lockName), false
	case "nonreentrant":
		return c.NonReentrantLock(lockName), false
	case "group":
		return c.GroupLock(lockName, groupSets[rng.IntN(len(groupSets))]...), false
	case "fair":
		// Every other acquisition takes the non-reentrant fair lock: the
		// same keys and queue, so the two kinds share one lock, as a
		// mixed deployment would; with an owner per acquisition no
		// ErrReentry may come.
		if rng.IntN(2) == 1 {
			return c.NonReentrantFairLock(lockName), false
		}
		return c.FairLock(lockName), false
	case "priority":
		return prioritized{c.PriorityLock(lockName), rng.IntN(priorities)}, false
	case "deadlock", "ordered":
		return &pair{first: c.Lock(lockName), second: c.Lock(pairName), swapped: w == "deadlock" && rng.IntN(2) == 1}, false
	case "rw":
		if rng.IntN(10) < 7 {
			return c.ReadWriteLock(lockName).ReadLock(), true
		}
		return c.ReadWriteLock(lockName).WriteLock(), false
	}
	return c.FencedLock(lockName), false
}

// runWorker is a worker process: it takes the workload's lock n times, each
// time incrementing the store's counter by read-modify-write (a read hold
// only reads; only the fenced lock has a token to fence with), and prints
// one JSON interval per acquisition, then a summary. One wait in 20 gets a
// deadline of 0-30 ms, so waiters are cancelled at random points. Between
// acquisitions it thinks for 0-4ms.
func runWorker(spec string) {
	var id, n int
	var addr, socket string
	fields := strings.SplitN(spec, "|", 6)
	id, _ = strconv.Atoi(fields[0])
	addr, socket = fields[1], fields[2]
	n, _ = strconv.Atoi(fields[3])
	seed, _ := strconv.ParseUint(fields[4], 10, 64)
	workload := fields[5]

	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fatal(err)
	}
	var tr *tracer
	if dir := os.Getenv(traceEnv); dir != "" {
		if tr, err = newTracer(dir, id); err != nil {
			fatal(err)
		}
		defer tr.close()
		rdb = tracedClient{Client: rdb, t: tr}
	}
	out := json.NewEncoder(os.Stdout)
	var outMu sync.Mutex
	emit := func(r record) {
		outMu.Lock()
		defer outMu.Unlock()
		out.Encode(r)
	}
	// Warnings only: reconnects under faults are expected and many.
	logger := slog.New(voidWatch{
		Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}),
		voided:  func() { emit(record{Voided: mono()}) },
	})
	opts := reentrant.Options{WatchdogTimeout: timeout, RepollInterval: repoll, FairWaitTimeout: fairTurn, DeadlockTimeout: deadlockTimeout, Logger: logger}
	if tr != nil {
		opts.Hooks = tr.hooks()
	}
	c, err := reentrant.New(rdb, opts)
	if err != nil {
		fatal(err)
	}
	st := newStoreClient(socket)
	sum := summary{Errors: map[string]int{}}
	emit(record{Client: c.ID()})
	if workload == "latch" {
		runLatchWorker(c, id, n, emit, &sum)
		n = 0
	}
	// Each lane is a goroutine taking the lock in turn, as a worker of its
	// own in the history (its id is the lane's; see laneOf).
	lanes := lanesOf(workload)
	sums := make([]summary, lanes)
	var wg sync.WaitGroup
	for g := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lane := id*lanes + g
			sums[g] = runLane(c, rdb, st, workload, lane, (n+g)/lanes, rand.New(rand.NewPCG(seed, uint64(lane))), emit)
		}()
	}
	wg.Wait()
	for _, ls := range sums {
		sum.Acquired += ls.Acquired
		sum.Cancelled += ls.Cancelled
		for k, v := range ls.Errors {
			sum.Errors[k] += v
		}
	}
	c.Close()
	rdb.Close()
	st.c.CloseIdleConnections()
	if err := goleak.Find(); err != nil {
		sum.Leaked = err.Error()
	}
	emit(record{Summary: &sum})
}

// runLane takes workload's lock n times as worker lane (see runWorker),
// and returns what it saw.
func runLane(c *reentrant.Client, rdb rueidis.Client, st storeClient, workload string, id, n int, rng *rand.Rand, emit func(record)) summary {
	if workload == "crowded" && id%2 == 1 {
		return runPrivateLane(c, id, n, rng)
	}
	sum := summary{Errors: map[string]int{}}
	var acq int64 // acquisitions tried
	for sum.Acquired < n {
		f, read := pick(c, rdb, workload, rng)
		if p, ok := f.(*pair); ok {
			p.emit = func(o op) { o.Worker, o.Acq = id, int64(id)<<40|(acq+1); emit(record{Op: &o}) }
		}
		wait := 5 * time.Second
		if rng.IntN(20) == 0 {
			wait = time.Duration(rng.IntN(30_000)) * time.Microsecond
			sum.Cancelled++
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		acq++
		q := int64(id)<<40 | acq
		call := mono()
		held, err := f.Lock(ctx)
		ret := mono()
		if err != nil {
			sum.Errors[kind(err)]++
			// An error reply means the script did not run: nothing to
			// check. Anything else leaves the outcome open.
			if !scripts.IsReply(err) {
				emit(record{Op: &op{Worker: id, Acq: q, Kind: "acquire", Call: call, Ret: math.MaxInt64, Out: "unknown", Done: ret}})
			}
			cancel()
			continue
		}
		emit(record{Op: &op{Worker: id, Acq: q, Kind: "acquire", Call: call, Ret: ret, Out: "ok"}})
		start := mono()
		// A fresh hold's deadline is its acquire's send time + 0.9 TTL.
		sent := start
		if d, ok := reentrant.LeaseDeadline(held); ok {
			sent = start + int64(time.Until(d)) - int64(timeout-timeout/10)
		}
		var cancelledAt, lostAt atomic.Int64
		context.AfterFunc(held, func() {
			now := mono()
			cancelledAt.Store(now)
			if errors.Is(context.Cause(held), reentrant.ErrLockLost) {
				lostAt.Store(now)
			}
		})
		token, _ := reentrant.TokenFrom(held)
		owner, _ := reentrant.OwnerFrom(held)
		// Work only under a hold still believed: a reply that came after
		// the lease's local deadline (a partition) gives a held context
		// already cancelled.
		if held.Err() != nil {
		} else if v, ok, err := st.read(token); err != nil {
			sum.Errors["store"]++
		} else if ok && !read {
			if _, err := st.write(token, v); err != nil {
				sum.Errors["store"]++
			}
		}
		// A holder whose wait had a short deadline has a held context
		// that ends with it: it does not stall.
		if workload == "stall" && wait == 5*time.Second && rng.IntN(stallEvery) == 0 {
			stall(held, st, token, &sum)
		}
		// The interval ends at the earliest of now (Unlock is next), the
		// held context's cancellation, and the local lease deadline: a
		// process that was starved or paused may see the deadline pass
		// before its watchdog could cancel anything.
		end := mono()
		if held.Err() != nil {
			// Cancelled already (a stalled hold, whose give-back follows the
			// cancellation at once): its AfterFunc has the time, but runs on
			// a goroutine of its own that a busy machine may not have run
			// yet. Wait for it rather than take now, which comes after the
			// stalled holder's late store calls, for the hold's end.
			for cancelledAt.Load() == 0 {
				runtime.Gosched()
			}
		}
		if at := cancelledAt.Load(); at != 0 && at < end {
			end = at
		}
		if d, ok := reentrant.LeaseDeadline(held); ok {
			end = min(end, mono()+int64(time.Until(d)))
		}
		call = mono()
		err = f.Unlock(held)
		ret = mono()
		if at := lostAt.Load(); at != 0 {
			emit(record{Op: &op{Worker: id, Acq: q, Kind: "lost", Call: at, Ret: at, Out: "ok"}})
		}
		rel := op{Worker: id, Acq: q, Kind: "release", Call: call, Ret: ret, Out: "ok"}
		freed := ret
		switch {
		case errors.Is(err, reentrant.ErrStalled):
			// Given back as the held context was cancelled: the lock is
			// free from then on, but for a round trip (oracle E's slack).
			freed = end
		case err != nil:
			freed = 0
		}
		switch {
		case errors.Is(err, reentrant.ErrLockLost) || errors.Is(err, reentrant.ErrNotHeld) || errors.Is(err, reentrant.ErrStalled):
			rel.Out = "notheld"
		case err != nil:
			rel.Out, rel.Ret, rel.Done = "unknown", math.MaxInt64, ret
		}
		if err != nil {
			sum.Errors[kind(err)]++
		}
		emit(record{Op: &rel})
		emit(record{Interval: &interval{Worker: id, Owner: owner.String(), Read: read, Sent: sent, Start: start, End: end, Freed: freed, Token: token}})
		sum.Acquired++
		cancel()
		// Think time: the lock is sometimes free with waiters waiting, so
		// a release that fails to wake them shows as an unexplained wait
		// (oracle E) instead of being hidden by the releaser taking the
		// lock straight back.
		time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
	}
	return sum
}

// stall is a holder of the stall workload that stops reporting progress:
// it waits for its hold to end, which must come within stallWithin and a
// few round trips (the "stall late" error otherwise), with ErrStalled, or
// ErrLockLost if a fault took the lock first (the "stall cause" error
// otherwise). Then, as a stalled job still running would, it writes to the
// store again with its old token: the store must refuse it once the next
// holder has used the store (oracle A counts what it accepts).
func stall(held context.Context, st storeClient, token int64, sum *summary) {
	select {
	case <-held.Done():
	case <-time.After(stallWithin + 5*time.Second):
		sum.Errors["stall late"]++
		return
	}
	if cause := context.Cause(held); !errors.Is(cause, reentrant.ErrStalled) && !errors.Is(cause, reentrant.ErrLockLost) {
		sum.Errors["stall cause"]++
	}
	if v, ok, err := st.read(token); err == nil && ok {
		_, _ = st.write(token, v)
	}
}

// runPrivateLane takes and gives back a lock of the lane's own n times,
// each wait 1-30ms or 5s long, so that the calls of the crowded workload's
// shared lock go coalesced with others (a lock that nobody else wants is
// taken and given back at the pace of the client's round trips). What it
// does is not judged but by oracle D: no lock of its own is left held.
func runPrivateLane(c *reentrant.Client, id, n int, rng *rand.Rand) summary {
	sum := summary{Errors: map[string]int{}}
	l := c.Lock(fmt.Sprintf("chaos:crowd:%d", id))
	for range n {
		wait := 5 * time.Second
		if rng.IntN(4) == 0 {
			wait = time.Duration(1+rng.IntN(30)) * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		held, err := l.Lock(ctx)
		if err == nil {
			err = l.Unlock(held)
		}
		if err != nil {
			sum.Errors["private-"+kind(err)]++
		}
		cancel()
	}
	return sum
}

func kind(err error) string {
	switch {
	case errors.Is(err, reentrant.ErrStalled):
		return "stalled"
	case errors.Is(err, reentrant.ErrLockLost):
		return "lost"
	case errors.Is(err, reentrant.ErrNotHeld):
		return "not-held"
	case errors.Is(err, reentrant.ErrDeadlock):
		return "deadlock"
	case errors.Is(err, reentrant.ErrReentry):
		return "reentry"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "redis"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chaos worker:", err)
	os.Exit(1)
}
