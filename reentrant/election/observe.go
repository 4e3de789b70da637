package election

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// Observed is one sight of an election: who leads (Owner "" for nobody),
// or, with Err set, that the observer cannot see who leads now.
type Observed struct {
	Leader
	// Err is why the observer cannot see the election: a read that
	// failed or was refused, or a lost connection. Leader is then the
	// last one seen, and the next Observed without Err says it sees
	// again. Last before the channel closes, Err is reentrant.ErrClosed
	// after the Client's Close, or reentrant.ErrInvalidArgument for an
	// Observe that could not start.
	Err error
}

// Observe returns a channel that receives the election's leader at once,
// then at every change (a new term, a new value, nobody leading), leaders
// in term order, and is closed when ctx ends. A Leader whose Owner is ""
// says nobody leads; its Term is the last one recorded (0 after Redis lost
// its data). An Observed with Err says the observer cannot see who leads
// (Redis unreachable, a read refused): "nobody leads" is never said for
// "I cannot see".
//
// Changes come by message, not by polling: Campaign, Proclaim and Resign
// announce them on the election's channel, to which Observe subscribes on
// a connection of its own before it reads the record. A leader whose
// process died announces nothing; Observe reads again when its hold's TTL
// runs out, so it never shows a dead leader for longer than the hold's
// lease (Options.WatchdogTimeout). After the connection is lost it
// subscribes and reads again. On a Client whose user may not use the
// channel, it reads every Options.RepollInterval instead. A reader that
// falls behind sees the latest leader, not every one in between: the
// channel holds one value, replaced while unread.
func (e *Election) Observe(ctx context.Context) <-chan Observed {
	out := make(chan Observed, 1)
	if err := e.check(ctx); err != nil {
		out <- Observed{Err: err}
		close(out)
		return out
	}
	o := &observer{e: e, out: out}
	if !e.rt.Go(func() { o.run(ctx) }) {
		out <- Observed{Err: e.closed()}
		close(out)
	}
	return out
}

// resync bounds how long Observe trusts its last read without a message:
// a belt to the channel's braces (a message lost without the connection).
const resync = 10 * time.Second

// observer serves one Observe's channel.
type observer struct {
	e     *Election
	out   chan Observed
	last  Observed // the last sent
	sent  bool
	blind bool // the last sent has Err set
}

// run follows the election until ctx ends or the Client closes,
// subscribing again after each lost connection, with a pause that doubles
// up to a second.
func (o *observer) run(ctx context.Context) {
	defer close(o.out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(o.e.rt.Closing, cancel)()
	pause := time.Duration(0)
	for {
		subscribed, err := o.watch(ctx)
		switch {
		case o.e.rt.Closing.Err() != nil:
			o.send(Observed{Leader: o.last.Leader, Err: o.e.closed()})
			return
		case ctx.Err() != nil:
			return
		case subscribed: // lost, after it worked: subscribe again at once
			pause = 0
		default:
			o.cannotSee(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(max(2*pause, 10*time.Millisecond), time.Second)
	}
}

// watch subscribes to the election's channel and follows the record
// until ctx ends or the connection is lost; on a Client that publishes
// nothing, or whose user may not subscribe there, it follows by reading
// every RepollInterval. It reports whether it subscribed, and why it
// stopped.
func (o *observer) watch(ctx context.Context) (subscribed bool, err error) {
	if o.e.rt.Publish == scripts.PublishNone {
		return false, o.follow(ctx, nil, nil, o.e.rt.Repoll)
	}
	d, release := o.e.rt.Conn().Client.Dedicate()
	wake := make(chan struct{}, 1)
	closed := d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {
		select {
		case wake <- struct{}{}:
		default: // a read is due already
		}
	}})
	err = d.Do(ctx, o.subscribe(d)).Error()
	if err != nil {
		d.Close()
		release()
		if scripts.IsNoPermission(err) {
			return false, o.follow(ctx, nil, nil, o.e.rt.Repoll)
		}
		return false, o.e.fail("subscribe", err)
	}
	defer release()
	defer d.Close()
	return true, o.follow(ctx, wake, closed, resync)
}

func (o *observer) subscribe(d rueidis.DedicatedClient) rueidis.Completed {
	ch := scripts.ElectionChannel(o.e.lock.Key())
	if o.e.rt.Publish == scripts.PublishSharded {
		return d.B().Ssubscribe().Channel(ch).Build()
	}
	return d.B().Subscribe().Channel(ch).Build()
}

// follow reads the record and sends what changed, again at each wake,
// when the leader's hold would end, and every period, until ctx ends
// (nil) or closed tells the connection is lost (its error). A read that
// fails is told and tried again within 100 ms.
func (o *observer) follow(ctx context.Context, wake <-chan struct{}, closed <-chan error, every time.Duration) error {
	for {
		next := every
		l, ttl, err := o.e.read(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			o.cannotSee(err)
			next = min(next, 100*time.Millisecond)
		default:
			o.see(l)
			if l.Owner != "" && ttl >= 0 {
				next = min(next, ttl+time.Millisecond)
			}
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case err := <-closed:
			t.Stop()
			return o.e.fail("subscription", cmp.Or(err, errors.New("connection closed")))
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// cannotSee tells the reader, once per failure, that the observer cannot
// see the election, with the last leader seen.
func (o *observer) cannotSee(err error) {
	if o.blind {
		return
	}
	o.send(Observed{Leader: o.last.Leader, Err: err})
}

// see sends l if it is news: the first sight, or the first after a
// failure; a leader of another owner, term or value, and no older term
// than the last sent; or nobody leading, after a leader or after a newer
// term (one that began and ended between two reads). (Nobody's term is
// the last recorded, which a Redis that lost its data no longer has: a
// leader shown then must not stay shown.)
func (o *observer) see(l Leader) {
	last := o.last.Leader
	switch {
	case !o.sent || o.blind:
	case l.Owner == "":
		if last.Owner == "" && l.Term <= last.Term {
			return
		}
	case l.Term < last.Term || l.Owner == last.Owner && l.Term == last.Term && l.Value == last.Value:
		return
	}
	o.send(Observed{Leader: l})
}

// send puts v on the channel, in place of the value there if the reader
// has not taken it: the reader gets the latest, and the observer never
// waits for it.
func (o *observer) send(v Observed) {
	select {
	case o.out <- v:
	default:
		select {
		case <-o.out:
		default:
		}
		o.out <- v
	}
	o.last, o.sent, o.blind = v, true, v.Err != nil
}
