package election

import (
	"context"
	"time"

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

// observer serves one Observe's channel.
type observer struct {
	e     *Election
	out   chan Observed
	last  Observed // the last sent
	sent  bool
	blind bool // the last sent has Err set
}

// run follows the leader until ctx ends or the Client closes.
func (o *observer) run(ctx context.Context) {
	defer close(o.out)
	f := o.e.follower(o.look, o.cannotSee, leaderNews)
	if f.run(ctx) {
		o.send(Observed{Leader: o.last.Leader, Err: o.e.closed()})
	}
}

// look reads the leader, tells what changed, and asks to look again when
// the leader's hold would end.
func (o *observer) look(ctx context.Context) (time.Duration, error) {
	l, ttl, err := o.e.read(ctx)
	if err != nil {
		return 0, err
	}
	o.see(l)
	if l.Owner != "" && ttl >= 0 {
		return ttl + time.Millisecond, nil
	}
	return 0, nil
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

// send gives the reader v (see latest) and remembers it as the last sent.
func (o *observer) send(v Observed) {
	latest(o.out, v)
	o.last, o.sent, o.blind = v, true, v.Err != nil
}

// follower returns a follower of the election's channel that calls look
// and blind.
func (e *Election) follower(look func(context.Context) (time.Duration, error), blind func(error), wake func(string) bool) *follower {
	return &follower{rt: e.rt, channel: scripts.ElectionChannel(e.lock.Key()), fail: e.fail, look: look, blind: blind, wake: wake}
}
