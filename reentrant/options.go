package reentrant

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/scripts"
)

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// WatchdogTimeout is Redisson's lockWatchdogTimeout: the TTL given to a
	// lock taken without LeaseFor, which the watchdog renews every
	// WatchdogTimeout/3 for as long as the lock is held. Default 30s.
	WatchdogTimeout time.Duration

	// RenewBatchSize is the most locks one renewal script call extends.
	// On a cluster client a call never spans two hash slots, so only locks
	// whose names share a hash tag fill a batch; on any other it does,
	// until the server refuses such a call (a cluster proxy, which looks
	// like one node), and from then on keeps to one slot. Default 100.
	RenewBatchSize int

	// OnLockLost, if set, is called once for each hold found lost, after
	// its held contexts are cancelled, with the cause they were given
	// (errors.Is(cause, ErrLockLost)). It runs on the watchdog's loop and
	// must not block. For a permit of a PermitExpirableSemaphore, name is
	// the semaphore's and owner.String() the permit's id. It is a shortcut:
	// Hooks.HoldEnded sees every acquisition end, lost or not.
	OnLockLost func(name string, owner Owner, cause error)

	// Hooks watch the client's acquires, holds, renewals and wake-ups,
	// for metrics and traces. None by default.
	Hooks Hooks

	// Logger receives what an operator should see, each said once rather
	// than per attempt: a warning for each lost hold, one when the pub/sub
	// connection is lost (and a note when it is back), one per outage that
	// holds waits up for a re-poll interval, however many (and a note when
	// Redis answers again), one at New for missing channel rights. Default
	// slog.Default().
	Logger *slog.Logger

	// PubSub is the kind of pub/sub that lock releases are announced on
	// (PubSubClassic or PubSubSharded).
	// It must match the Java Redisson services sharing the locks. Zero
	// means detect: sharded (SPUBLISH/SSUBSCRIBE) on a Redis 7+ cluster, as
	// Redisson 3.22+ does, classic everywhere else.
	PubSub PubSubMode

	// RepollInterval is the longest a waiting Lock sleeps without a release
	// message before trying again; a wait is also bounded by the holder's
	// remaining TTL. It covers releases that announce nothing (a crashed
	// holder, Redisson's spin lock) and messages lost with a connection.
	// Default 1s.
	RepollInterval time.Duration

	// FairWaitTimeout is Redisson's fairLockWaitTimeout (threadWaitTime):
	// the turn each fair-lock waiter is given in the queue. A waiter's
	// deadline is the one ahead of it plus this; each grant moves every
	// deadline this much earlier; a waiter still at the head past its
	// deadline is taken for dead and skipped. A call with WaitAtMost uses
	// its wait instead, as Redisson's tryLock(waitTime) does. It must match
	// the Java services sharing fair locks. Default 300s, Redisson's
	// default; at least RepollInterval.
	FairWaitTimeout time.Duration

	// PriorityAging is how much earlier one level of priority places a
	// PriorityLock's waiter in the queue: its place is its arrival moved
	// earlier by its priority times PriorityAging, so a waiter is passed
	// only by those of higher priority that arrive within (their priority
	// - its priority) x PriorityAging after it. Every client sharing a
	// priority lock must use the same value (see docs/priority.md).
	// Default 1s; at least 1µs.
	PriorityAging time.Duration

	// StrictPriority orders a PriorityLock's queue by priority first and
	// arrival second, with no aging: a waiter may then wait as long as
	// higher priorities keep arriving. Every client sharing a priority
	// lock must use the same value.
	StrictPriority bool

	// DeadlockTimeout is how long a Lock call whose ctx carries an owner
	// (one that may hold other locks) waits before it looks for a cycle of
	// owners waiting for each other (see ErrDeadlock and
	// docs/deadlocks.md); it looks again once per RepollInterval after
	// that. A shorter wait costs nothing extra, nor does a wait by an
	// owner made for the call. Default 1s, as PostgreSQL's
	// deadlock_timeout; negative turns detection off.
	DeadlockTimeout time.Duration

	// ReplicaSync asks replicas to confirm each lock's writes, as
	// Redisson's checkLockSyncedSlaves does. Off by default.
	ReplicaSync ReplicaSync

	// FencingCounterTTL is how long a fenced lock's token counter
	// (redisson_lock_token:{name}) lives after the last token drawn from
	// it; each draw sets it again. Default 24h; NoExpiry keeps it for good,
	// as Redisson does. Tokens stay larger than every earlier one across
	// the expiry, since each is floored to the server's clock in
	// microseconds. Java's RFencedLock draws with a plain INCR and would
	// start again at 1 on an expired counter, so names shared with Java
	// need NoExpiry, which FromRedissonConfig sets (docs/fencing.md).
	FencingCounterTTL time.Duration

	// NameMapper, if set, maps each name given to this Client (to Lock,
	// FairLock, Semaphore and the other handles, to Do and to Inspect) to
	// its key in Redis, as Redisson's NameMapper.map does: give both sides
	// the same mapping, or a Java service that prefixes its names misses
	// the Go side's locks. A name is mapped once, when the handle is made;
	// every key and channel derived from it (queues, channels, latches)
	// derives from the mapped name, as in Redisson. A handle's Name returns
	// the name as given; hooks, logs, errors and Inspect show the key.
	// None by default.
	NameMapper func(name string) string
}

// PubSubMode is the kind of pub/sub that lock releases are announced on.
type PubSubMode = pubsub.Mode

// The pub/sub modes.
const (
	// PubSubClassic is PUBLISH and SUBSCRIBE.
	PubSubClassic = pubsub.Classic
	// PubSubSharded is SPUBLISH and SSUBSCRIBE (Redis 7+ cluster).
	PubSubSharded = pubsub.Sharded
)

// ReplicaSync makes every acquire, renewal and release send WAIT in the
// same pipeline as its script, on the same connection, so the reply says
// how many replicas have the script's writes. An acquire confirmed by fewer
// than Replicas is rolled back and fails with ErrNotSynced; a renewal so
// confirmed does not count (the hold is lost at its local deadline unless a
// later renewal is confirmed); a release is kept, since a failover can then
// only bring the hold back until its TTL ends. See docs/deployment.md.
type ReplicaSync struct {
	// Replicas is how many replicas must confirm: 1 for "at least one".
	// 0 turns sync off. ConnectedReplicas does as Redisson does.
	Replicas int

	// Timeout is how long WAIT waits for them. Default 1s (Redisson's
	// slavesSyncTimeout).
	Timeout time.Duration

	// Required makes a server that refuses WAIT (some managed Redis
	// services) an error, ErrSyncUnavailable, instead of a warning that
	// turns sync off.
	Required bool
}

// NoExpiry is what RemainTTL returns for a lock whose key has no TTL, and
// the Options.FencingCounterTTL that keeps fencing counters for good.
const NoExpiry time.Duration = -1

const (
	defaultWatchdogTimeout = 30 * time.Second
	minTimeout             = 30 * time.Millisecond
)

func (o Options) withDefaults() (Options, error) {
	for _, d := range []struct {
		name       string
		v          *time.Duration
		def, least time.Duration
	}{
		{"WatchdogTimeout", &o.WatchdogTimeout, defaultWatchdogTimeout, minTimeout},
		{"RepollInterval", &o.RepollInterval, time.Second, time.Millisecond},
		{"PriorityAging", &o.PriorityAging, time.Second, time.Microsecond},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < d.least:
			return o, fmt.Errorf("relock: %w: %s %v is below %v", ErrInvalidArgument, d.name, *d.v, d.least)
		}
	}
	switch {
	case o.RenewBatchSize == 0:
		o.RenewBatchSize = 100
	case o.RenewBatchSize < 0:
		return o, fmt.Errorf("relock: %w: RenewBatchSize %d is negative", ErrInvalidArgument, o.RenewBatchSize)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.FairWaitTimeout == 0:
		o.FairWaitTimeout = 300 * time.Second
	case o.FairWaitTimeout < o.RepollInterval:
		return o, fmt.Errorf("relock: %w: FairWaitTimeout %v is below RepollInterval %v: live waiters would be skipped", ErrInvalidArgument, o.FairWaitTimeout, o.RepollInterval)
	}
	if o.DeadlockTimeout == 0 {
		o.DeadlockTimeout = time.Second
	}
	switch {
	case o.FencingCounterTTL == 0:
		o.FencingCounterTTL = 24 * time.Hour
	case o.FencingCounterTTL < time.Millisecond && o.FencingCounterTTL != NoExpiry:
		return o, fmt.Errorf("relock: %w: FencingCounterTTL %v is below 1ms (NoExpiry keeps the counter)", ErrInvalidArgument, o.FencingCounterTTL)
	}
	if err := o.ReplicaSync.check(); err != nil {
		return o, err
	}
	o.ReplicaSync = o.ReplicaSync.withDefaults()
	switch o.PubSub {
	case 0, pubsub.Classic, pubsub.Sharded:
	default:
		return o, fmt.Errorf("relock: %w: unknown PubSub mode %d", ErrInvalidArgument, o.PubSub)
	}
	return o, nil
}

// ConnectedReplicas, as ReplicaSync.Replicas, is Redisson's
// checkLockSyncedSlaves: WAIT asks for every replica the lock's master has
// connected (relock reads how many with ROLE, again when WAIT's count
// differs, and every 10s while it is 0), and the writes count as confirmed
// when at least one replica confirmed them. A master with no replica needs
// none and gets no WAIT, so the setting fits every deployment: on a single
// node it costs one ROLE every 10s.
const ConnectedReplicas = scripts.Connected

// check returns the first reason s cannot be used.
func (s ReplicaSync) check() error {
	switch {
	case s.Replicas < 0 && s.Replicas != ConnectedReplicas:
		return fmt.Errorf("relock: %w: ReplicaSync.Replicas %d is negative", ErrInvalidArgument, s.Replicas)
	case s.Timeout < 0:
		return fmt.Errorf("relock: %w: ReplicaSync.Timeout %v is negative", ErrInvalidArgument, s.Timeout)
	case s.Replicas != 0 && s.Timeout > 0 && s.Timeout < time.Millisecond:
		return fmt.Errorf("relock: %w: ReplicaSync.Timeout %v is below 1ms (WAIT counts milliseconds; 0 would wait forever)", ErrInvalidArgument, s.Timeout)
	}
	return nil
}

// withDefaults fills in the timeout when sync is on.
func (s ReplicaSync) withDefaults() ReplicaSync {
	if s.Replicas != 0 && s.Timeout == 0 {
		s.Timeout = time.Second
	}
	return s
}

// A LockOption changes how one Lock, TryLock or Do call acquires (the
// Client's settings are its Options).
type LockOption struct{ apply func(*acquireConfig) }

type acquireConfig struct {
	wait        time.Duration // how long to wait in all; < 0: until ctx ends
	waitSet     bool          // NoWait or WaitAtMost was given: a second one is refused
	lease       time.Duration // 0: the watchdog keeps the lock
	retries     int           // tries after the first; < 0: no limit
	retryDelay  time.Duration // 0: retry when the lock may be free
	timeout     time.Duration // bounds each attempt's script call; 0: only ctx does
	priority    int           // a priority lock's waiter's, 0 to 255
	prioritized bool          // the Priority option was given
	progress    time.Duration // a new hold's progress deadline (ProgressWithin); 0: none
	err         error
}

// newAcquireConfig is the config of a call on something of kind k that
// waits wait unless opts say otherwise.
func newAcquireConfig(wait time.Duration, k Kind, opts []LockOption) acquireConfig {
	cfg := acquireConfig{wait: wait, retries: -1}
	if len(opts) > 0 {
		// Only here does the config go to the heap (an option is a func
		// given its address): a call without options allocates nothing.
		with := cfg
		for _, o := range opts {
			if o.apply == nil {
				with.invalid("zero LockOption")
				continue
			}
			o.apply(&with)
		}
		if with.prioritized && k != KindPriority {
			with.invalid("Priority(%d) is for a PriorityLock, not a %s", with.priority, k.described())
		}
		switch k {
		case KindSemaphore, KindPermitSemaphore, KindLatch, KindRate:
			with.noProgress(k.described())
		}
		cfg = with
	}
	return cfg
}

// noProgress refuses ProgressWithin for what cannot keep a progress
// deadline (see ProgressWithin).
func (cfg *acquireConfig) noProgress(what string) {
	if cfg.progress > 0 {
		cfg.invalid("ProgressWithin is for a lock's hold, not a %s", what)
	}
}

func (cfg *acquireConfig) invalid(format string, args ...any) {
	if cfg.err == nil {
		cfg.err = fmt.Errorf("relock: %w: "+format, append([]any{ErrInvalidArgument}, args...)...)
	}
}

// NoWait makes one attempt: the lock is taken now or not at all. It and
// WaitAtMost each say how long to wait: a call given both, or either twice,
// is refused with ErrInvalidArgument rather than one silently winning.
func NoWait() LockOption { return WaitAtMost(0) }

// WaitAtMost waits up to d for the lock (0 is NoWait). The ctx may end the
// wait sooner. A call given it twice, or with NoWait, is refused with
// ErrInvalidArgument.
func WaitAtMost(d time.Duration) LockOption {
	return LockOption{func(cfg *acquireConfig) {
		switch {
		case d < 0:
			cfg.invalid("WaitAtMost(%v): negative wait", d)
		case cfg.waitSet:
			cfg.invalid("two waits given (NoWait or WaitAtMost twice, or both): give one")
		}
		cfg.wait, cfg.waitSet = d, true
	}}
}

// Priority places the caller in a PriorityLock's queue by priority p, 0
// to 255: higher is served sooner (see Client.PriorityLock). Default 0.
// Any other kind of lock or synchronizer refuses it with
// ErrInvalidArgument.
func Priority(p int) LockOption {
	return LockOption{func(cfg *acquireConfig) {
		if p < 0 || p > maxPriority {
			cfg.invalid("Priority(%d): a priority is 0 to %d", p, maxPriority)
			return
		}
		cfg.priority, cfg.prioritized = p, true
	}}
}

// LeaseFor takes the lock for d and no longer: the watchdog does not renew
// it, Redis expires it after d, and the held context is cancelled just
// before that (Redisson's leaseTime). It must be at least 1ms.
func LeaseFor(d time.Duration) LockOption {
	return LockOption{func(cfg *acquireConfig) {
		if d < time.Millisecond {
			cfg.invalid("LeaseFor(%v): a lease must be at least 1ms", d)
		}
		cfg.lease = d
	}}
}

// RetryCount limits the attempts to 1+n: after n failed retries, the lock
// is not acquired.
func RetryCount(n int) LockOption {
	return LockOption{func(cfg *acquireConfig) {
		if n < 0 {
			cfg.invalid("RetryCount(%d): negative count", n)
		}
		cfg.retries = n
	}}
}

// RetryDelay retries every d instead of when the lock may have become free.
// Most callers are better served without it: by default a waiter retries as
// soon as the lock is released.
func RetryDelay(d time.Duration) LockOption {
	return LockOption{func(cfg *acquireConfig) {
		if d <= 0 {
			cfg.invalid("RetryDelay(%v): delay must be positive", d)
		}
		cfg.retryDelay = d
	}}
}

// attemptTimeout bounds each acquire script call without bounding the held
// context (Redlock's per-master timeout).
func attemptTimeout(d time.Duration) LockOption {
	return LockOption{func(cfg *acquireConfig) { cfg.timeout = d }}
}

// noLease returns an ErrInvalidArgument error when the options set a lease
// on something that has none (what).
func (cfg *acquireConfig) noLease(what string) error {
	if cfg.err != nil {
		return cfg.err
	}
	if cfg.lease != 0 {
		return fmt.Errorf("relock: %w: LeaseFor: a %s has no lease", ErrInvalidArgument, what)
	}
	return nil
}

// mayRetry reports whether attempt n (from 0), which failed, may be
// followed by another: the call waits, has attempts left, and is not one
// master's part of a Redlock (whose attempts each have a timeout).
func (cfg *acquireConfig) mayRetry(n int) bool {
	return cfg.timeout == 0 && cfg.wait != 0 && (cfg.retries < 0 || n < cfg.retries)
}

// sleep is how long a waiter with no better bound sleeps before trying
// again: the RetryDelay, or else repoll (a wake-up may end it sooner).
func (cfg *acquireConfig) sleep(repoll time.Duration) time.Duration {
	if cfg.retryDelay > 0 {
		return cfg.retryDelay
	}
	return repoll
}

// markTTL is how long a mark that a waiter renews with each attempt lives:
// its client's registration in a lock's waiters' set and its offer
// (directed.go), its waits-for edge (deadlock.go). It outlives the gap
// between two attempts of a live waiter, which RepollInterval bounds.
func (o *Options) markTTL() time.Duration { return 2*o.RepollInterval + time.Second }

// maxPriority is the highest priority a PriorityLock waiter may ask for.
const maxPriority = 255

// fairTurn is the turn a fair lock's waiter is given in the queue,
// Redisson's threadWaitTime: the wait limit when the call has one (wait >
// 0), as with Redisson's tryLock(waitTime, ...), else FairWaitTimeout.
func (o *Options) fairTurn(wait time.Duration) time.Duration {
	if wait > 0 {
		return wait
	}
	return o.FairWaitTimeout
}

// aliveWindow is how long a priority lock's waiter may go without an
// attempt before it is taken for dead, whatever its wait: a lease, and at
// least three re-poll intervals, the longest a live waiter sleeps between
// attempts.
func (o *Options) aliveWindow(time.Duration) time.Duration {
	return max(o.WatchdogTimeout, 3*o.RepollInterval)
}
