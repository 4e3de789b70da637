package election

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/scripts"
)

// Observe returns a channel that receives the election's leader at once,
// then at every change (a new term, a new value, nobody leading), leaders
// in term order, and is closed when ctx ends. A Leader whose Owner is ""
// says nobody leads; its Term is the last one recorded (0 after Redis lost
// its data).
//
// Changes come by message, not by polling: Campaign, Proclaim and Resign
// announce them on the election's channel, to which Observe subscribes on
// a connection of its own before it reads the record. A leader whose
// process died announces nothing; Observe reads again when its hold's TTL
// runs out, so it never shows a dead leader for longer than the hold's
// lease (Options.WatchdogTimeout). After the connection is lost it
// subscribes and reads again. A reader that falls behind sees the latest
// leader, not every one in between.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if e.check() != nil || ctx == nil {
		close(out)
		return out
	}
	go e.observe(ctx, out)
	return out
}

// resync bounds how long Observe trusts its last read without a message:
// a belt to the channel's braces (a message lost without the connection).
const resync = 10 * time.Second

// observe serves Observe's channel, subscribing again after each lost
// connection, with a pause that doubles up to a second.
func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	w := watch{e: e, out: out}
	pause := time.Duration(0)
	for {
		d, release := e.conn.Dedicate()
		wake := make(chan struct{}, 1)
		closed := d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(rueidis.PubSubMessage) {
			select {
			case wake <- struct{}{}:
			default: // a read is due already
			}
		}})
		if err := d.Do(ctx, e.subscribe(d)).Error(); err == nil {
			pause = 0
			w.follow(ctx, wake, closed)
		}
		d.Close()
		release()
		pause = min(max(2*pause, 10*time.Millisecond), time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

func (e *Election) subscribe(d rueidis.DedicatedClient) rueidis.Completed {
	ch := scripts.ElectionChannel(e.lock.Key())
	if e.pub == scripts.PublishSharded {
		return d.B().Ssubscribe().Channel(ch).Build()
	}
	return d.B().Subscribe().Channel(ch).Build()
}

// watch is one observer's state: the last leader sent.
type watch struct {
	e    *Election
	out  chan<- Leader
	last Leader
	sent bool
}

// follow reads the record and sends what changed, again at each message,
// when the leader's hold would end, and every resync, until ctx ends or
// the connection is lost.
func (w *watch) follow(ctx context.Context, wake <-chan struct{}, closed <-chan error) {
	for {
		next := resync
		l, ttl, err := w.e.read(ctx)
		switch {
		case err != nil:
			next = 100 * time.Millisecond
		case !w.send(ctx, l):
			return
		case l.Owner != "" && ttl >= 0:
			next = min(next, ttl+time.Millisecond)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-closed:
			t.Stop()
			return
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// send sends l if it is news: a leader of another owner, term or value,
// and no older term than the last sent; or nobody leading, after a leader
// or after a newer term (one that began and ended between two reads).
// (Nobody's term is the last recorded, which a Redis that lost its data
// no longer has: a leader shown then must not stay shown.) It reports
// false when ctx ended.
func (w *watch) send(ctx context.Context, l Leader) bool {
	switch {
	case !w.sent:
	case l.Owner == "":
		if w.last.Owner == "" && l.Term <= w.last.Term {
			return true
		}
	case l.Term < w.last.Term || l.Owner == w.last.Owner && l.Term == w.last.Term && l.Value == w.last.Value:
		return true
	}
	select {
	case w.out <- l:
		w.last, w.sent = l, true
		return true
	case <-ctx.Done():
		return false
	}
}
