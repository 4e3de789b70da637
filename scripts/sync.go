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
// [ErrNotSynced] or [ErrSyncRefused] beside its result.
type Conn struct {
	rueidis.Client
	Replicas int // 0: no sync
	Timeout  time.Duration
}

func (s Conn) wait() rueidis.Completed {
	return s.B().Wait().Numreplicas(int64(s.Replicas)).Timeout(s.Timeout.Milliseconds()).Build()
}

// check turns WAIT's reply into nil, ErrNotSynced (with the count) or
// ErrSyncRefused (with the server's words). An error that is not a reply
// leaves the count unknown: reported as not synced.
func (s Conn) check(r rueidis.RedisResult) error {
	n, err := r.AsInt64()
	switch {
	case IsReply(err):
		return fmt.Errorf("%w: %v", ErrSyncRefused, err)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrNotSynced, err)
	case n < int64(s.Replicas):
		return fmt.Errorf("%w: %d of %d", ErrNotSynced, n, s.Replicas)
	}
	return nil
}

// execSynced runs one call and its WAIT in one pipeline, and again as EVAL
// when the server did not know the script. syncErr is nil when the script's
// reply is an error or unknown: then there is nothing to confirm.
func (s *script) execSynced(ctx context.Context, c Conn, keys, args []string) (r rueidis.RedisResult, syncErr error) {
	rs := c.pipeline(ctx, keys, func() rueidis.Commands { return rueidis.Commands{s.evalsha(c, keys, args), c.wait()} })
	if isNoScript(rs[0].Error()) {
		rs = c.pipeline(ctx, keys, func() rueidis.Commands { return rueidis.Commands{s.eval(c, keys, args), c.wait()} })
	}
	if rs[0].Error() != nil && !rueidis.IsRedisNil(rs[0].Error()) {
		return rs[0], nil
	}
	return rs[0], c.check(rs[1])
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
// server accepts WAIT at all; it returns WAIT's error. On a cluster it goes
// with a keyed command on one dedicated connection, so that it reaches a
// master: a replica refuses WAIT.
func ProbeWait(ctx context.Context, c rueidis.Client) error {
	wait := c.B().Wait().Numreplicas(0).Timeout(0).Build()
	if c.Mode() != rueidis.ClientModeCluster {
		return c.Do(ctx, wait).Error()
	}
	var rs []rueidis.RedisResult
	err := c.Dedicated(func(d rueidis.DedicatedClient) error {
		rs = d.DoMulti(ctx, d.B().Exists().Key("relock:probe").Build(), wait)
		return nil
	})
	if err != nil {
		return err
	}
	return rs[1].Error()
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
