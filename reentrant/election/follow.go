package election

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// resync bounds how long a follower trusts its last read without a
// message: a belt to the channel's braces (a message lost without the
// connection).
const resync = 10 * time.Second

// follower follows an election by its channel, for Observe,
// ObserveCandidates and a leader that may be asked to resign: it calls
// look at once, at every message that wake lets through, when the time
// look returns has passed, and every resync, until ctx ends or the Client
// closes. Through an outage it calls blind with why it cannot see, then
// subscribes again, with a pause that doubles up to a second.
type follower struct {
	rt      addon.Runtime
	channel string
	// fail words a failed subscription, as Election.fail does.
	fail func(op string, err error) error
	// look reads what is followed and tells what changed; its duration
	// bounds the wait for the next look (0: resync), its error says it
	// cannot see (looked at again within 100 ms).
	look  func(ctx context.Context) (time.Duration, error)
	blind func(err error)
	wake  func(message string) bool // nil: every message
}

// run follows until ctx ends (it returns false) or the Client closes
// (true).
func (f *follower) run(ctx context.Context) (closed bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(f.rt.Closing, cancel)()
	pause := time.Duration(0)
	for {
		subscribed, err := f.watch(ctx)
		switch {
		case f.rt.Closing.Err() != nil:
			return true
		case ctx.Err() != nil:
			return false
		case subscribed: // lost, after it worked: subscribe again at once
			pause = 0
		default:
			f.blind(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(max(2*pause, 10*time.Millisecond), time.Second)
	}
}

// watch subscribes to the election's channel and follows until ctx ends
// or the connection is lost; on a Client that publishes nothing, or whose
// user may not subscribe there, it follows by reading every
// RepollInterval. It reports whether it subscribed, and why it stopped.
func (f *follower) watch(ctx context.Context) (subscribed bool, err error) {
	if f.rt.Publish == scripts.PublishNone {
		return false, f.follow(ctx, nil, nil, f.rt.Repoll)
	}
	d, release := f.rt.Conn().Client.Dedicate()
	wake := make(chan struct{}, 1)
	closed := d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		if f.wake != nil && !f.wake(m.Message) {
			return
		}
		select {
		case wake <- struct{}{}:
		default: // a read is due already
		}
	}})
	err = d.Do(ctx, f.subscribe(d)).Error()
	if err != nil {
		d.Close()
		release()
		if scripts.IsNoPermission(err) {
			return false, f.follow(ctx, nil, nil, f.rt.Repoll)
		}
		return false, f.fail("subscribe", err)
	}
	defer release()
	defer d.Close()
	return true, f.follow(ctx, wake, closed, resync)
}

func (f *follower) subscribe(d rueidis.DedicatedClient) rueidis.Completed {
	if f.rt.Publish == scripts.PublishSharded {
		return d.B().Ssubscribe().Channel(f.channel).Build()
	}
	return d.B().Subscribe().Channel(f.channel).Build()
}

// follow looks, again at each wake, when look's time comes and every
// period, until ctx ends (nil) or closed tells the connection is lost (its
// error). A look that fails is told and tried again within 100 ms.
func (f *follower) follow(ctx context.Context, wake <-chan struct{}, closed <-chan error, every time.Duration) error {
	for {
		next := every
		due, err := f.look(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			f.blind(err)
			next = min(next, 100*time.Millisecond)
		case due > 0:
			next = min(next, due)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case err := <-closed:
			t.Stop()
			return f.fail("subscription", cmp.Or(err, errors.New("connection closed")))
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// leaderNews lets through the messages that may change who leads: a term
// (Campaign, Proclaim, Resign, a request to resign), not a candidate's
// coming or going ("c").
func leaderNews(m string) bool { return m != "c" }

// latest puts v on ch, a channel of one that its sender alone fills, in
// place of the value there if the reader has not taken it: the reader gets
// the latest, and the sender never waits for it.
func latest[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}
