package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/relock-go/relock/reentrant"
)

// locker is one "process" of a library: it blocks until it holds name and
// returns how to release it.
type locker interface {
	lock(ctx context.Context, name string) (unlock func() error, err error)
	close()
}

// lib is a library under test and how it was configured to block until the
// lock is acquired.
type lib struct {
	name, config string
	connect      func(addr string) (locker, error)
	// floor: not a lock library but the least a pair costs on a client
	// stack (noopfloor.go) or with Redisson's lock layout
	// (redissonscripts.go); it runs scenarios 1 and 2 only.
	floor bool
}

var libs = []lib{
	{name: "relock", config: "defaults (watchdog 30s, pub/sub wake-ups)", connect: newRelock},
	{name: "relock, AlwaysPipelining", config: "the same, on a rueidis client with AlwaysPipelining", connect: newRelockPipelining},
	{name: "relock, wrapped client", config: "the same, on a rueidis client wrapped in a type of the user's (as hooks or tracing do): no lone wires, every call on the client's shared connections", connect: newRelockWrapped},
	{name: "relock, FairLock", config: "FairLock, defaults: waiters served in arrival order", connect: newRelockFair},
	{name: "relock, PriorityLock", config: "PriorityLock, defaults, every waiter at priority 0: served in arrival order", connect: newRelockPriority},
	{name: "relock, GroupLock", config: "GroupLock, defaults: each lock name a value of one group, bench:group", connect: newRelockGroup},
	{name: "rueidislock", config: "KeyMajority 1, NoLoopTracking", connect: newRueidislock},
	{name: "redsync", config: "default delays, unlimited tries", connect: newRedsync},
	{name: "bsm/redislock", config: "LinearBackoff(10ms), TTL 30s", connect: newRedislock},
	{name: "redsync, AutoPipeline", config: "as redsync, on go-redis's AutoPipeline() client (experimental in v9.23)", connect: newRedsyncAuto},
	{name: "bsm/redislock, AutoPipeline", config: "as bsm/redislock, on go-redis's AutoPipeline() client (experimental in v9.23)", connect: newRedislockAuto},
	{name: "floor: no-op pair, rueidis", config: "two EVALSHA of `return 1` per pair on a rueidis client: no lock", connect: newRueidisFloor, floor: true},
	{name: "floor: no-op pair, go-redis", config: "two EVALSHA of `return 1` per pair on a go-redis client: no lock", connect: newGoredisFloor, floor: true},
	{name: "floor: relock's scripts", config: "relock's lock and release scripts, with the keys and arguments its Client sends uncontended, run bare through its coalescer on a rueidis client: what they cost, without relock's Client (holds, watchdog, contexts, waiting)", connect: newRelockScripts, floor: true},
	{name: "floor: Redisson's lock scripts", config: "RedissonLock's lock and unlock scripts, run bare on a rueidis client: what Redisson's lock layout costs, without waiting or a watchdog", connect: newRedissonScripts, floor: true},
}

// floorLibs are the libraries of -floor: relock and rueidislock beside
// Redisson's own lock scripts, run bare (see redissonScripts), to tell
// what Redisson's lock layout costs Redis apart from what relock adds.
func floorLibs() []lib {
	return []lib{
		*findLib("relock"),
		*findLib("floor: relock's scripts"),
		*findLib("floor: Redisson's lock scripts"),
		*findLib("rueidislock"),
		*findLib("floor: no-op pair, rueidis"),
	}
}

func findLib(name string) *lib {
	for i := range libs {
		if libs[i].name == name {
			return &libs[i]
		}
	}
	panic("no library " + name)
}

type relockLocker struct {
	rdb rueidis.Client
	c   *reentrant.Client
	// handle returns the lock of the kind measured; nil: Client.Lock.
	handle func(c *reentrant.Client, name string) *reentrant.Lock
}

func newRelock(addr string) (locker, error) {
	rdb, c, err := relockClient(addr)
	if err != nil {
		return nil, err
	}
	return relockLocker{rdb: rdb, c: c}, nil
}

// newRelockFair is relock's FairLock with default options.
func newRelockFair(addr string) (locker, error) {
	rdb, c, err := relockClient(addr)
	if err != nil {
		return nil, err
	}
	return relockLocker{rdb: rdb, c: c, handle: (*reentrant.Client).FairLock}, nil
}

// newRelockPriority is relock's PriorityLock with default options.
func newRelockPriority(addr string) (locker, error) {
	rdb, c, err := relockClient(addr)
	if err != nil {
		return nil, err
	}
	return relockLocker{rdb: rdb, c: c, handle: (*reentrant.Client).PriorityLock}, nil
}

// newRelockGroup is relock's GroupLock with default options: every lock
// name is a value of the group bench:group, so the 64 goroutines' own
// keys are 64 values of one hash.
func newRelockGroup(addr string) (locker, error) {
	rdb, c, err := relockClient(addr)
	if err != nil {
		return nil, err
	}
	return relockLocker{rdb: rdb, c: c, handle: func(c *reentrant.Client, name string) *reentrant.Lock {
		return c.GroupLock("bench:group", name)
	}}, nil
}

// newRelockPipelining is relock on a rueidis client that always sends
// through its pipelining goroutines, as every connection of a busy service
// ends up doing.
func newRelockPipelining(addr string) (locker, error) {
	rdb, c, err := relockClientWith(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, AlwaysPipelining: true})
	if err != nil {
		return nil, err
	}
	return relockLocker{rdb: rdb, c: c}, nil
}

// newRelockWrapped is relock on a rueidis client wrapped in a type of the
// caller's, as rueidishook or a tracing wrapper does: relock then sends
// every call through the wrapper, on the shared connections.
func newRelockWrapped(addr string) (locker, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	c, err := reentrant.New(wrapped{rdb}, reentrant.Options{})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return relockLocker{rdb: rdb, c: c}, nil
}

// wrapped is a user's wrapper of a rueidis client that changes nothing.
type wrapped struct{ rueidis.Client }

// relockClient returns a relock Client with default options on its own
// rueidis client.
func relockClient(addr string) (rueidis.Client, *reentrant.Client, error) {
	return relockClientWith(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
}

func relockClientWith(opt rueidis.ClientOption) (rueidis.Client, *reentrant.Client, error) {
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, err
	}
	c, err := reentrant.New(rdb, reentrant.Options{})
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rdb, c, nil
}

func (r relockLocker) lock(ctx context.Context, name string) (func() error, error) {
	mu := r.c.Lock(name)
	if r.handle != nil {
		mu = r.handle(r.c, name)
	}
	held, err := mu.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return func() error { return mu.Unlock(held) }, nil
}

func (r relockLocker) close() { r.c.Close(); r.rdb.Close() }

type rueidisLocker struct{ l rueidislock.Locker }

func newRueidislock(addr string) (locker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
	})
	return rueidisLocker{l}, err
}

func (r rueidisLocker) lock(ctx context.Context, name string) (func() error, error) {
	held, cancel, err := r.l.WithContext(ctx, name)
	if err != nil {
		return nil, err
	}
	// rueidislock holds the lock while the returned context lives.
	if err := held.Err(); err != nil {
		cancel()
		return nil, fmt.Errorf("rueidislock: hold already ended: %w", context.Cause(held))
	}
	return func() error { cancel(); return nil }, nil
}

func (r rueidisLocker) close() { r.l.Close() }

type redsyncLocker struct {
	client *goredis.Client
	rs     *redsync.Redsync
}

func newRedsync(addr string) (locker, error) {
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	return redsyncLocker{client, redsync.New(redsyncgoredis.NewPool(client))}, nil
}

// newRedsyncAuto is redsync on go-redis's AutoPipeliner, which batches the
// commands of concurrent callers on a few connections, as rueidis does.
func newRedsyncAuto(addr string) (locker, error) {
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	ap, err := client.AutoPipeline()
	if err != nil {
		client.Close()
		return nil, err
	}
	return redsyncLocker{client, redsync.New(redsyncgoredis.NewPool(ap))}, nil
}

func (r redsyncLocker) lock(ctx context.Context, name string) (func() error, error) {
	m := r.rs.NewMutex(name, redsync.WithTries(math.MaxInt32))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() error { _, err := m.UnlockContext(context.Background()); return err }, nil
}

func (r redsyncLocker) close() { r.client.Close() }

type redisLocker struct {
	client *goredis.Client
	rl     *redislock.Client
}

func newRedislock(addr string) (locker, error) {
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	return redisLocker{client, redislock.New(client)}, nil
}

// newRedislockAuto is bsm/redislock on go-redis's AutoPipeliner.
func newRedislockAuto(addr string) (locker, error) {
	client := goredis.NewClient(&goredis.Options{Addr: addr})
	ap, err := client.AutoPipeline()
	if err != nil {
		client.Close()
		return nil, err
	}
	return redisLocker{client, redislock.New(ap)}, nil
}

func (r redisLocker) lock(ctx context.Context, name string) (func() error, error) {
	l, err := r.rl.Obtain(ctx, name, 30*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}

func (r redisLocker) close() { r.client.Close() }
