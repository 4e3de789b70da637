package scripts

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/rueidis"
)

// What a failed call's error says of the server's answer: a file of its
// own, so that what sends calls (script.go, lone.go, sync.go) reads it
// without those files using one another.

// IsReply reports whether err is an error reply from the server. Such a
// script failed as a whole and changed nothing; any other error (a broken
// connection, a timeout, a cancelled context) leaves unknown whether the
// script ran.
func IsReply(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && !re.IsNil()
}

// Answered reports whether the server answered a call that ended in err:
// it succeeded, or it was refused for a reason that asking again does not
// change (WRONGTYPE, NOPERM; not one IsUnavailable names).
func Answered(err error) bool {
	return err == nil || (IsReply(err) && !IsUnavailable(err))
}

// IsUnavailable reports whether err is a reply saying the server cannot run
// scripts for now: it is loading its data (LOADING), it is a replica after a
// failover (READONLY), its master is down (MASTERDOWN), the cluster is down
// or moving a slot (CLUSTERDOWN, TRYAGAIN), or another script is running
// too long (BUSY). The script did not run, and a later attempt may.
func IsUnavailable(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) || re.IsNil() {
		return false
	}
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY "} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

// dialFailed reports whether err is a failure to connect, before anything
// was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// unsent reports whether r is a connection that failed to open for another
// call's sake: rueidis dials a connection, and greets the server on it,
// once for every call waiting on it, with the first one's ctx, so that ctx
// ending fails them all: the dial with "operation was canceled", the
// greeting with context.Canceled. Nothing of this call was sent then; a
// call whose own ctx goes on may send again. A cancel is told by a ctx's
// Err alone, so context.Canceled with ctx alive is another's; a
// DeadlineExceeded is not taken for unsent: a synchronous call's own
// timed-out write reads so, and a call that was sent must not run twice.
func unsent(ctx context.Context, r rueidis.RedisResult) bool {
	if ctx.Err() != nil {
		return false
	}
	err := r.NonRedisError()
	return dialFailed(err) || errors.Is(err, context.Canceled)
}
