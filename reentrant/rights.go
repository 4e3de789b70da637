package reentrant

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// What an ACL user must be allowed, found out at New rather than at the
// first Lock. Redis 7 creates users with no channel rights (resetchannels):
// such a user's scripts fail at their PUBLISH after having changed the lock,
// so a release would report an error although the lock was released.

// rightsProbe reads TIME, as the fair, fenced, permit and rate-limiter
// scripts do: a user refused TIME could take plain locks only.
const rightsProbe = "return redis.call('time')[1] ~= nil"

var rightsProbeSHA = func() string {
	sum := sha1.Sum([]byte(rightsProbe))
	return hex.EncodeToString(sum[:])
}()

// probeChannels are one channel of each family relock publishes on, all in
// one slot.
var probeChannels = []string{
	scripts.LockChannel("relock:probe"),
	scripts.RWChannel("relock:probe"),
	scripts.SemaphoreChannel("relock:probe"),
	scripts.LatchChannel("relock:probe"),
	scripts.WakeChannel("relock:probe", "probe"),
}

// probeRights asks, in one round trip, whether rdb's user may run relock's
// scripts (EVAL, EVALSHA, and TIME inside them), publish with pub on its
// channels, and count a channel's listeners (PUBSUB NUMSUB, or SHARDNUMSUB
// with pub sharded). A missing script right is an error wrapping
// ErrNoPermission. A missing channel right is not: it is returned as
// noChannels, the server's refusal, and the client then publishes nothing
// (see New); nor is a refused count, returned as noCount, and then its
// releases publish before they count (see scripts.Release.Count). A server
// that cannot be reached or answer now is not probed, so that New does not
// wait for Redis.
func probeRights(rdb rueidis.Client, pub scripts.Publish) (noChannels, noCount, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmds := rueidis.Commands{
		rdb.B().Eval().Script(rightsProbe).Numkeys(0).Build(),
		rdb.B().Evalsha().Sha1(rightsProbeSHA).Numkeys(0).Build(),
	}
	if pub == scripts.PublishSharded {
		cmds = append(cmds, rdb.B().PubsubShardnumsub().Channel(probeChannels[0]).Build())
	} else {
		cmds = append(cmds, rdb.B().PubsubNumsub().Channel(probeChannels[0]).Build())
	}
	for _, ch := range probeChannels {
		if pub == scripts.PublishSharded {
			cmds = append(cmds, rdb.B().Spublish().Channel(ch).Message("").Build())
		} else {
			cmds = append(cmds, rdb.B().Publish().Channel(ch).Message("").Build())
		}
	}
	rs := rdb.DoMulti(ctx, cmds...)
	for _, r := range rs {
		if err := r.Error(); errors.Is(err, rueidis.ErrClosing) {
			return nil, nil, fmt.Errorf("relock: %w: the rueidis client is closed (%w)", ErrInvalidArgument, err)
		}
		if err := r.Error(); err != nil && (!scripts.IsReply(err) || scripts.IsUnavailable(err)) {
			return nil, nil, nil // not reachable, or not ready: the first Lock will tell
		}
	}
	for i, what := range []string{"EVAL (with TIME inside scripts)", "EVALSHA"} {
		if err := rs[i].Error(); scripts.IsNoPermission(err) {
			return nil, nil, fmt.Errorf("relock: %w: %s: %v", ErrNoPermission, what, err)
		}
	}
	if err := rs[2].Error(); scripts.IsNoPermission(err) {
		noCount = err
	}
	for _, r := range rs[3:] {
		if err := r.Error(); scripts.IsNoPermission(err) {
			return err, noCount, nil
		}
	}
	return nil, noCount, nil
}
