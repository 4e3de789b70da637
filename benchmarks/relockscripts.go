package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// relockScriptsLocker is relock's own lock and release scripts, with the
// keys and arguments relock's Client sends for an uncontended pair, run
// bare through relock's coalescer on a rueidis client: no hold table, no
// watchdog, no contexts, no waiting. Beside relock it splits a pair's
// cost into what its scripts and their coalescing cost (this floor) and
// what its Client adds; beside the no-op pair, what the scripts cost
// beyond two calls.
type relockScriptsLocker struct {
	rdb      rueidis.Client
	co       *scripts.Coalescer
	id       string
	next     *atomic.Int64
	stop     context.CancelFunc
	draining *sync.WaitGroup
}

func newRelockScripts(addr string) (locker, error) {
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	closing, stop := context.WithCancel(context.Background())
	draining := new(sync.WaitGroup)
	co := scripts.NewCoalescer(rdb, false, closing, func(f func()) bool { draining.Go(f); return true })
	return relockScriptsLocker{rdb: rdb, co: co, id: uuid.NewString(), next: new(atomic.Int64), stop: stop, draining: draining}, nil
}

var errRelockHeld = errors.New("relock's scripts: the lock is held, and this stand-in does not wait")

func (r relockScriptsLocker) lock(ctx context.Context, name string) (func() error, error) {
	c := scripts.Conn{Client: r.rdb, Coalesce: r.co}
	owner := r.id + ":" + strconv.FormatInt(r.next.Add(1), 10)
	a, err := scripts.LockAcquire(ctx, c, scripts.Acquire{Key: name, Owner: owner, Lease: 30 * time.Second,
		Wake: scripts.Wake{Client: r.id, Settle: scripts.SettleKeep, Register: 3 * time.Second}})
	switch {
	case err != nil:
		return nil, err
	case !a.OK:
		return nil, errRelockHeld
	}
	return func() error {
		_, err := scripts.Release{Key: name, Owner: owner, RequestID: owner, Lease: 30 * time.Second,
			LatchTTL: 10 * time.Second, Publish: scripts.PublishClassic, Believed: true,
			Directed: true, Handoff: true, Offer: scripts.Offer{Client: r.id}}.Run(context.Background(), c)
		return err
	}, nil
}

func (r relockScriptsLocker) close() { r.stop(); r.draining.Wait(); r.rdb.Close() }
