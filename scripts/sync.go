package scripts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// ErrNotSynced says a script ran, but fewer replicas than asked acknowledged
// its writes before the timeout: a failover now could lose them.
var ErrNotSynced = errors.New("lock not confirmed by enough replicas")

// ErrSyncRefused says the server refused WAIT (some managed Redis services
// do), so no script's writes can be confirmed on replicas. The script ran.
var ErrSyncRefused = errors.New("the server refused WAIT")

// Conn is where scripts run: a rueidis client, and the replica sync every
// script gets. With Replicas above 0, each script is followed, in the same
// pipeline on the same connection, by WAIT Replicas Timeout: the reply then
// says whether the script's writes reached that many replicas (WAIT sent
// apart would run on another connection and prove nothing about this one's
// writes), and a script whose writes were not confirmed reports
// [ErrNotSynced] or [ErrSyncRefused] beside its result. With Replicas
// [Connected], the WAIT asks for every replica the master has.
type Conn struct {
	rueidis.Client
	Replicas int // 0: no sync; [Connected]: as Redisson
	Timeout  time.Duration
	// Seen counts each master's replicas for [Connected]; New makes one.
	Seen *ReplicaCounts
	// Coalesce, when set (and Replicas is 0), coalesces the commonest
	// scripts' calls that many goroutines make at once (see Coalescer).
	Coalesce *Coalescer
}

// Connected, as [Conn].Replicas, is Redisson's checkLockSyncedSlaves: WAIT
// for every replica the keys' master has connected (ROLE says how many),
// and count the writes confirmed when at least one replica confirmed them.
// A master with no replica needs none, and gets no WAIT. A server that
// refuses ROLE is one that refuses sync: [ErrSyncRefused].
const Connected = -1

func (s Conn) wait(n int) rueidis.Completed {
	return s.B().Wait().Numreplicas(int64(n)).Timeout(s.Timeout.Milliseconds()).Build()
}

// check turns WAIT's reply, for a WAIT that asked for want replicas, into
// nil, ErrNotSynced (with the count) or ErrSyncRefused (with the server's
// words). An error that is not a reply leaves the count unknown: reported
// as not synced. With [Connected], one replica is enough, and a count other
// than want makes the count be read again.
func (s Conn) check(r rueidis.RedisResult, want int, key string) error {
	n, err := r.AsInt64()
	need := int64(want)
	if s.Replicas == Connected {
		need = 1
		if err == nil && n != int64(want) {
			s.Seen.forget(s.slotOf(key))
		}
	}
	switch {
	case IsReply(err):
		return fmt.Errorf("%w: %v", ErrSyncRefused, err)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrNotSynced, err)
	case n < need:
		return fmt.Errorf("%w: %d of %d", ErrNotSynced, n, want)
	}
	return nil
}

// execSynced runs one call and its WAIT in one pipeline, and again as EVAL
// when the server did not know the script. syncErr is nil when the script's
// reply is an error or unknown: then there is nothing to confirm.
func (s *script) execSynced(ctx context.Context, c Conn, keys, args []string) (r rueidis.RedisResult, syncErr error) {
	want := c.Replicas
	if want == Connected {
		n, err := c.Seen.count(ctx, c, keys[0])
		switch {
		case IsReply(err): // ROLE refused: no way to count, as with WAIT refused
			r, _ := s.exec(ctx, Conn{Client: c.Client}, keys, args)
			if r.Error() != nil {
				return r, nil
			}
			return r, fmt.Errorf("%w: ROLE: %v", ErrSyncRefused, err)
		case err != nil: // the script was not sent
			return rueidis.NewErrorResult(err), nil
		case n == 0:
			return s.exec(ctx, Conn{Client: c.Client}, keys, args)
		}
		want = n
	}
	rs := c.pipeline(ctx, keys, func() rueidis.Commands { return rueidis.Commands{s.evalsha(c, keys, args), c.wait(want)} })
	if isNoScript(rs[0].Error()) {
		rs = c.pipeline(ctx, keys, func() rueidis.Commands { return rueidis.Commands{s.eval(c, keys, args), c.wait(want)} })
	}
	if rs[0].Error() != nil && !rueidis.IsRedisNil(rs[0].Error()) {
		return rs[0], nil
	}
	return rs[0], c.check(rs[1], want, keys[0])
}

// ReplicaCounts remembers how many replicas the master of each slot has
// connected, for [Connected] sync, as Redisson's MasterSlaveEntry keeps
// availableSlaves. A count is read (ROLE, on the keys' master) when there
// is none, after a WAIT that another number of replicas answered, and,
// when it is 0, again after 10s, so that a replica that joins is waited
// for. Its methods are safe for concurrent use.
type ReplicaCounts struct {
	mu     sync.Mutex
	bySlot map[uint16]replicaCount
}

type replicaCount struct {
	n  int
	at time.Time
}

// recountNone is how long a count of 0 is believed.
const recountNone = 10 * time.Second

// slotOf is key's slot on a cluster, and 0 for every key elsewhere, where
// one master has them all.
func (c Conn) slotOf(key string) uint16 {
	if c.Mode() != rueidis.ClientModeCluster {
		return 0
	}
	return Slot(key)
}

// count returns how many replicas key's master has connected. A nil rc
// remembers nothing: it asks every time.
func (rc *ReplicaCounts) count(ctx context.Context, c Conn, key string) (int, error) {
	slot := c.slotOf(key)
	if rc != nil {
		rc.mu.Lock()
		seen, ok := rc.bySlot[slot]
		rc.mu.Unlock()
		if ok && (seen.n > 0 || time.Since(seen.at) < recountNone) {
			return seen.n, nil
		}
	}
	rs := c.pipeline(ctx, []string{key}, func() rueidis.Commands {
		return rueidis.Commands{c.B().Exists().Key(key).Build(), c.B().Role().Build()}
	})
	if err := rs[0].Error(); err != nil {
		return 0, err
	}
	role, err := rs[1].ToArray()
	if err != nil {
		return 0, err
	}
	n := 0
	if len(role) >= 3 {
		if kind, _ := role[0].ToString(); kind == "master" {
			replicas, _ := role[2].ToArray()
			n = len(replicas)
		}
	}
	if rc != nil {
		rc.mu.Lock()
		if rc.bySlot == nil {
			rc.bySlot = make(map[uint16]replicaCount)
		}
		rc.bySlot[slot] = replicaCount{n: n, at: time.Now()}
		rc.mu.Unlock()
	}
	return n, nil
}

// forget drops slot's count: it is read again before the next script.
func (rc *ReplicaCounts) forget(slot uint16) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	delete(rc.bySlot, slot)
}

// pipeline sends the commands build makes in one pipeline on one
// connection. On a cluster it takes a dedicated connection to the keys'
// node: the cluster client would follow a MOVED for the script alone and
// leave WAIT on the old node, where it would confirm nothing. A MOVED (the
// slot changed hands; the script did not run) is followed by a keyed
// command, which makes rueidis refresh its slot map, and the pipeline is
// built and sent again, a few times at most.
func (c Conn) pipeline(ctx context.Context, keys []string, build func() rueidis.Commands) []rueidis.RedisResult {
	if c.Mode() != rueidis.ClientModeCluster {
		return c.DoMulti(ctx, build()...)
	}
	var rs []rueidis.RedisResult
	for try := 0; try < 3; try++ {
		err := c.Dedicated(func(d rueidis.DedicatedClient) error {
			rs = d.DoMulti(ctx, build()...)
			return nil
		})
		if err != nil {
			return []rueidis.RedisResult{rueidis.NewErrorResult(err), rueidis.NewErrorResult(err)}
		}
		re, ok := rueidis.IsRedisErr(rs[0].Error())
		if !ok {
			return rs
		}
		if _, moved := re.IsMoved(); !moved && !re.IsTryAgain() {
			return rs
		}
		c.Do(ctx, c.B().Exists().Key(keys[0]).Build())
	}
	return rs
}

// ProbeWait sends WAIT 0 0, which returns at once, to find out whether the
// server accepts WAIT at all, and, with role, ROLE too (which [Connected]
// sync needs); it returns the first error reply. On a cluster they go
// with a keyed command on one dedicated connection, so that they reach a
// master: a replica refuses WAIT.
func ProbeWait(ctx context.Context, c rueidis.Client, role bool) error {
	cmds := rueidis.Commands{c.B().Wait().Numreplicas(0).Timeout(0).Build()}
	if role {
		cmds = append(cmds, c.B().Role().Build())
	}
	var rs []rueidis.RedisResult
	if c.Mode() != rueidis.ClientModeCluster {
		rs = c.DoMulti(ctx, cmds...)
	} else {
		err := c.Dedicated(func(d rueidis.DedicatedClient) error {
			rs = d.DoMulti(ctx, append(rueidis.Commands{d.B().Exists().Key("relock:probe").Build()}, cmds...)...)
			return nil
		})
		if err != nil {
			return err
		}
		rs = rs[1:]
	}
	for _, r := range rs {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// execMultiSynced runs each call with its own WAIT, the calls side by side:
// on a cluster, a keyless WAIT may only share a pipeline with keys of one
// slot. A call whose writes were not confirmed gets an error result.
func (s *script) execMultiSynced(ctx context.Context, c Conn, calls []call) []rueidis.RedisResult {
	results := make([]rueidis.RedisResult, len(calls))
	var wg sync.WaitGroup
	for i, cl := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.execSynced(ctx, c, cl.keys, cl.args)
			if err != nil {
				r = rueidis.NewErrorResult(err)
			}
			results[i] = r
		}()
	}
	wg.Wait()
	return results
}
