package fence

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/reentrant/internal/retry"
	"github.com/relock-go/relock/scripts"
)

// TokenPast recovers a holder that a fencing store refused although it
// holds the lock: held is its hold of the fenced lock name on c, and past
// the token the store has seen (Guard.Token, or the token an
// election.Fenced refusal names). When held's owner holds the lock now,
// TokenPast draws a new token for that hold above past and returns held
// carrying it (reentrant.TokenFrom); the hold is otherwise unchanged and
// is released as before. When it does not, it returns an error wrapping
// reentrant.ErrNotHeld, and the caller must stop: the refusal was right.
//
// Why a holder can be refused. A fenced lock's tokens grow with its
// counter in Redis, and, when Redis loses the counter, start again from
// the clocks of the server and the drawing client, which are past every
// token drawn before. Only when both clocks stood behind the tokens drawn
// before the loss (stepped back) can a new holder draw a token below an
// older holder's. If that older holder used a resource, the store refuses
// the new one; TokenPast then puts the new holder ahead, and the store
// refuses the older one from then on. docs/fencing.md shows the case.
//
// A nil ctx or c, a ctx that is no hold, or a token past below 1 is
// reentrant.ErrInvalidArgument; a hold that has ended returns its cause.
func TokenPast(held context.Context, c *reentrant.Client, name string, past int64) (context.Context, error) {
	if held == nil || past < 1 {
		return nil, fmt.Errorf("relock: fence: %w: a nil ctx, or token %d (tokens start at 1)", reentrant.ErrInvalidArgument, past)
	}
	rt, ok := addon.Of(c)
	if !ok {
		return nil, fmt.Errorf("relock: fence: %w: a nil or closed Client", reentrant.ErrInvalidArgument)
	}
	owner, ok := reentrant.OwnerFrom(held)
	if _, fenced := reentrant.TokenFrom(held); !ok || !fenced {
		return nil, fmt.Errorf("relock: fence: %w: ctx is not a hold of a fenced lock", reentrant.ErrInvalidArgument)
	}
	if err := context.Cause(held); err != nil {
		return nil, err
	}
	// A reply lost is sent again (a few times, while held lasts): a
	// second draw is harmless, tokens only grow.
	var (
		token int64
		holds bool
		err   error
	)
	stopped := retry.Until(pastBackoff, retry.Sleep(held, rt.Closing.Done()), func(n int) retry.Outcome {
		token, holds, err = scripts.TokenPast(held, rt.Conn(), rt.Key(name), owner.String(), past)
		if _, answered := rueidis.IsRedisErr(err); err == nil || answered || n == 2 {
			return retry.Done
		}
		return retry.Again
	})
	switch {
	case stopped != nil:
		return nil, fmt.Errorf("relock: fence: a token for %q past %d: %w (after %w)", name, past, stopped, err)
	case err != nil:
		return nil, rt.Fail(fmt.Sprintf("fence: a token past %d for", past), name, err)
	case !holds:
		return nil, fmt.Errorf("relock: fence: a token for %q past %d: %w", name, past, reentrant.ErrNotHeld)
	}
	if err := context.Cause(held); err != nil { // lost while the script ran
		return nil, err
	}
	return rt.WithToken(held, token), nil
}

// pastBackoff paces TokenPast's tries after a lost reply.
var pastBackoff = retry.Backoff{First: 10 * time.Millisecond, Max: 100 * time.Millisecond}
