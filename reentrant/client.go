package reentrant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/reentrant/internal/attempt"
	"github.com/relock-go/relock/reentrant/internal/directed"
	"github.com/relock-go/relock/reentrant/internal/latches"
	"github.com/relock-go/relock/reentrant/internal/outage"
	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/reentrant/internal/runner"
	"github.com/relock-go/relock/reentrant/internal/waitstate"
	"github.com/relock-go/relock/scripts"
)

// Client makes and keeps locks on one rueidis client. Make one per rueidis
// client and share it; it is safe for concurrent use.
//
// A Client has an id, a random UUID (version 8, relock's mark) that prefixes
// its owners. Close stops
// it; it does not close the rueidis client.
type Client struct {
	rdb      rueidis.Client
	id       string
	opts     Options
	publish  scripts.Publish
	cluster  bool
	directed bool // plain and fenced locks take directed wakes (directed.go)
	// counts: its releases may count a lock channel's listeners (see
	// scripts.Release.Count); not when the user is refused PUBSUB NUMSUB.
	counts bool
	// names: per lock name, handoff offers (directed.go) and queued marks
	// (fair.go); handoffs: what the client sends for its offers.
	names     waitstate.Table
	handoffs  directed.Handoffs
	nextOwner atomic.Int64
	// nextRequest numbers release requests, for their unlock latch.
	nextRequest atomic.Uint64
	holds       *holdTable // the holds it has, and their watchdog
	sub         *pubsub.Subscriber
	latches     *latches.Sweeper
	outages     outage.Tracker // tells of waits held up by an outage, once per outage
	degraded    atomic.Bool    // told that subscribing is refused: waiters poll
	runner      runner.Runner  // runs the lock scripts

	// hookBeforeSubscribe, set by tests, runs between a failed attempt and
	// the subscription that follows it.
	hookBeforeSubscribe func()
	// hookBeforeSend, set by tests, runs between an attempt's directed-wake
	// arguments being decided and the attempt being sent.
	hookBeforeSend func()

	// attempts runs the acquire attempts a caller's ctx may cut short.
	attempts *attempt.Workers

	mu     sync.Mutex
	closed bool
	tasks  sync.WaitGroup // background cleanups, which Close waits for
	// closing is cancelled by Close; done is its Done channel.
	closing  context.Context
	shutdown context.CancelFunc
	done     <-chan struct{}
}

// New returns a Client that keeps locks on rdb, or an error: opts invalid
// (ErrInvalidArgument), the Redis user refused what relock needs
// (ErrNoPermission), or replica sync required and refused
// (ErrSyncUnavailable). It takes one round trip, more while a cluster
// cannot be reached (below). Close the Client when done; it does not close
// rdb.
//
// New checks, in one round trip, that the Redis user may do what relock
// needs (see docs/deployment.md for the ACL rules): a user refused scripts
// or TIME fails New with ErrNoPermission; a user with no rights on
// relock's channels gets a client whose releases wake no one and whose
// waiters poll every RepollInterval, with one warning.
//
// A Redis that is briefly unreachable does not fail New: the rights are
// then not checked, and on a cluster, where New asks the server's version
// to pick the pub/sub kind (unless Options.PubSub is set), it asks again
// for up to 10 s. Locks taken meanwhile wait as in any outage.
// (rueidis.NewClient, which dials, fails when it cannot connect.)
func New(rdb rueidis.Client, opts Options) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("relock: %w: nil rueidis client", ErrInvalidArgument)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cluster := rdb.Mode() == rueidis.ClientModeCluster
	if opts.PubSub == 0 {
		if opts.PubSub, err = detectPubSub(rdb, cluster); err != nil {
			return nil, err
		}
	}
	c := &Client{
		rdb:     rdb,
		id:      newClientID(),
		opts:    opts,
		publish: scripts.PublishClassic,
		cluster: cluster,
	}
	c.closing, c.shutdown = context.WithCancel(context.Background())
	c.done = c.closing.Done()
	c.attempts = attempt.New(c.closing, c.background, releaseWindow)
	if opts.PubSub == pubsub.Sharded {
		c.publish = scripts.PublishSharded
	}
	c.directed = !cluster || opts.PubSub == pubsub.Sharded
	noChannels, noCount, err := probeRights(rdb, c.publish)
	if err != nil {
		return nil, err
	}
	c.counts = noCount == nil
	if noCount != nil && noChannels == nil {
		opts.Logger.Info("relock: the Redis user may not run PUBSUB NUMSUB, so a release that hands a plain lock on also publishes on Redisson's channel, which slows handoffs when many clients wait; give it the right in docs/deployment.md",
			"error", noCount)
	}
	if noChannels != nil {
		c.publish, c.directed = scripts.PublishNone, false
		opts.Logger.Warn("relock: the Redis user may not publish on relock's channels, so releases wake no one and waiters poll every RepollInterval; give it the channel rights in docs/deployment.md",
			"error", noChannels, "repoll", opts.RepollInterval)
	}
	rs := opts.ReplicaSync
	co := scripts.NewCoalescer(rdb, cluster, c.closing, c.background)
	if err := c.runner.Start(rdb, co, rs.Replicas, rs.Timeout, rs.Required, ErrSyncUnavailable, opts.Logger); err != nil {
		c.shutdown() // what was started ends: a New that fails leaves nothing running
		c.tasks.Wait()
		return nil, err
	}
	// A lock's wake channel lingers a little after its last waiter leaves:
	// one that comes back soon (steady contention) finds it live.
	c.outages = outage.Tracker{Log: opts.Logger, After: opts.RepollInterval, Describe: describeWait}
	c.sub = pubsub.New(rdb, opts.PubSub, scripts.Slot, opts.Logger, min(opts.RepollInterval, time.Second), c.outages.Health())
	c.latches = latches.New(rdb, opts.Logger)
	c.handoffs = directed.Handoffs{Names: &c.names, ID: c.id, Sub: c.sub, Publish: c.publish, Conn: c.runner.Conn, Owners: &c.nextOwner,
		Lease: opts.WatchdogTimeout, Keep: opts.markTTL(), Log: opts.Logger, Background: c.background, Closing: c.closing, Window: releaseWindow}
	c.background(func() { c.latches.Run(c.closing) })
	c.holds = newHoldTable(&c.opts, c.runner.Conn, cluster)
	return c, nil
}

// describeWait names a wait of kind on name in an outage's warning.
func describeWait(kind, name string) string { return fmt.Sprintf("%s %q", Kind(kind).noun(), name) }

// detectPubSub picks Redisson's pub/sub kind: sharded on a Redis 7+ cluster,
// classic elsewhere. It is the only thing New asks of Redis, and only of a
// cluster: a service that starts while Redis restarts or fails over should
// start as a lock would wait, so a server that cannot be reached or cannot
// answer yet (LOADING, CLUSTERDOWN) is asked again for up to 10 s.
func detectPubSub(rdb rueidis.Client, cluster bool) (pubsub.Mode, error) {
	if !cluster {
		return pubsub.Classic, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := serverInfo(ctx, rdb)
	if err != nil {
		return 0, fmt.Errorf("relock: detecting the Redis version for the pub/sub mode (set Options.PubSub to skip): %w", err)
	}
	return pubSubFor(info), nil
}

// pubSubFor picks the pub/sub kind a cluster's INFO server calls for:
// sharded from Redis 7 on, and on Valkey, whose every release has sharded
// pub/sub (Valkey 8 reports redis_version 7.2.4 for compatibility, and its
// own valkey_version, which is what is read when it is there).
func pubSubFor(info string) pubsub.Mode {
	version := ""
	for _, line := range strings.Split(info, "\n") {
		switch field, value, _ := strings.Cut(strings.TrimSpace(line), ":"); field {
		case "valkey_version":
			return pubsub.Sharded
		case "redis_version":
			version = value
		}
	}
	major, _, _ := strings.Cut(version, ".")
	if n, err := strconv.Atoi(major); err == nil && n >= 7 {
		return pubsub.Sharded
	}
	return pubsub.Classic
}

// serverInfo reads INFO server, asking again, with backoff, while the
// server cannot be reached or cannot answer yet, until ctx ends. Its error
// is the last one that did not come from ctx ending, when there was one.
func serverInfo(ctx context.Context, rdb rueidis.Client) (string, error) {
	var info string
	var err, last error
	if retry.Until(infoBackoff, retry.Sleep(ctx, nil), func(int) retry.Outcome {
		info, err = rdb.Do(ctx, rdb.B().Info().Section("server").Build()).ToString()
		if ctx.Err() == nil || last == nil {
			last = err
		}
		if scripts.Answered(err) {
			return retry.Done
		}
		return pacing(err)
	}) != nil {
		return "", last
	}
	return info, err
}

// infoBackoff paces serverInfo; clients started together drift apart.
var infoBackoff = retry.Backoff{First: 50 * time.Millisecond, Max: time.Second, Jitter: true}

// ReplicaSync returns the replica sync in use: as configured, or off
// (Replicas 0) when the server refused WAIT. An operator can check it
// matches the Java side's checkLockSyncedSlaves.
func (c *Client) ReplicaSync() ReplicaSync {
	if !c.runner.Syncing() {
		return ReplicaSync{}
	}
	return c.opts.ReplicaSync
}

// PubSubMode returns the kind of pub/sub the client announces and awaits
// releases on, detected or configured; it must match the Java side's.
func (c *Client) PubSubMode() PubSubMode { return c.opts.PubSub }

// newRequestID names one release request for Redisson's unlock latch:
// unique per request, the client's id and a counter.
func (c *Client) newRequestID() string {
	var n [16]byte // formatted here, so that the id is one allocation
	return c.id + ":" + string(strconv.AppendUint(n[:0], c.nextRequest.Add(1), 36))
}

// ID returns the client's id, the UUID that prefixes its owners ("" for a
// nil Client). It is a version 8 UUID, which tells a relock client's owners
// from Java Redisson's (version 4).
func (c *Client) ID() string {
	if c == nil {
		return ""
	}
	return c.id
}

// Close stops the client and waits for its goroutines to end. Locks it
// still holds are no longer renewed and expire after their TTL; their held
// contexts are cancelled with cause ErrClosed. The unlock latches of
// answered releases still queued for deletion are deleted, waiting for
// Redis at most a second a round; if it does not answer, they expire with
// their 10s TTL. Every later call returns ErrClosed. Close is idempotent.
func (c *Client) Close() error {
	if !c.usable() {
		return fmt.Errorf("relock: %w: Close of a nil Client or one not made by New", ErrInvalidArgument)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.shutdown()
	c.mu.Unlock()
	c.holds.close(errClosed)
	c.tasks.Wait()
	c.handoffs.GiveBackAll()
	c.sub.Close()
	return nil
}

// background runs task in a goroutine that Close waits for, and reports
// whether it started; task must return soon after Close cancels c.closing.
// After Close it does not run.
func (c *Client) background(task func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.tasks.Add(1)
	go func() {
		defer c.tasks.Done()
		task()
	}()
	return true
}

// usable reports whether c was made by New: not nil, not a zero Client.
func (c *Client) usable() bool { return c != nil && c.done != nil }

// key returns name's key in Redis: name mapped by Options.NameMapper.
func (c *Client) key(name string) string {
	if c == nil || c.opts.NameMapper == nil {
		return name
	}
	return c.opts.NameMapper(name)
}

// errClosed is what calls on a closed Client return.
var errClosed = fmt.Errorf("relock: %w", ErrClosed)

func (c *Client) checkOpen() error {
	select {
	case <-c.done:
		return errClosed
	default:
		return nil
	}
}

// redisError turns an error from Redis into one of this package's errors
// where one fits, keeping the original in the chain (but for the errors
// relock's own scripts raise, which the package's errors say in full). An
// error this package made already (a change replicas did not confirm,
// say) is returned as it is: it names the lock, and once is enough.
func redisError(op, name string, err error) error {
	if strings.HasPrefix(err.Error(), "relock: ") {
		return err
	}
	err = scripts.Tidy(err)
	switch {
	case scripts.Code(err) == scripts.CodeRateNotSet:
		return fmt.Errorf("relock: %s %q: %w", op, name, ErrRateNotSet)
	case scripts.Code(err) == scripts.CodeRateExceeded:
		return fmt.Errorf("relock: %s %q: %w: more permits asked than the rate", op, name, ErrInvalidArgument)
	case scripts.Code(err) == scripts.CodeReentry:
		return fmt.Errorf("relock: %s %q: %w", op, name, ErrReentry)
	case scripts.IsWrongType(err):
		return fmt.Errorf("relock: %s %q: %w (%w)", op, name, ErrWrongType, err)
	case scripts.IsNoPermission(err):
		return fmt.Errorf("relock: %s %q: %w (%w)", op, name, ErrNoPermission, err)
	case errors.Is(err, rueidis.ErrClosing):
		return fmt.Errorf("relock: %s %q: %w (%w)", op, name, ErrClosed, err)
	}
	return fmt.Errorf("relock: %s %q: %w", op, name, err)
}

// waitError is the error of a wait that ctx ended: it wraps ctx.Err() and,
// when it says more, the cancellation cause.
func waitError(ctx context.Context, name string) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause != nil && cause != err {
		return fmt.Errorf("relock: waiting for %q: %w (%w)", name, err, cause)
	}
	return fmt.Errorf("relock: waiting for %q: %w", name, err)
}

// NewOwner returns a new owner, unique to this client; the zero Owner,
// which no lock accepts, for a nil Client or one not made by New.
func (c *Client) NewOwner() Owner {
	if !c.usable() {
		return Owner{}
	}
	var n [20]byte // formatted here, so that the id is one allocation
	return Owner{id: c.id + ":" + string(strconv.AppendInt(n[:0], c.nextOwner.Add(1), 10))}
}

// newClientID returns a new client id: a random UUID marked as relock's with
// version 8 (RFC 9562's custom version) where Redisson's Java ids are
// version 4, so that a lock's holder field tells a relock client from a
// Java one (relock before WakeTold chose where to listen by it).
func newClientID() string {
	u := uuid.New()
	u[6] = u[6]&0x0f | 0x80
	return u.String()
}
