package pubsub

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// conn is one subscription connection and the channels it serves. One
// goroutine owns it: it dials, sends SUBSCRIBE and UNSUBSCRIBE in the order
// they were queued (so a channel's subscribe and unsubscribe never cross),
// and reconnects when the connection is lost.
type conn struct {
	s        *Subscriber
	key      uint16
	channels map[string]*channel // guarded by s.mu
	ops      []op                // guarded by s.mu
	kick     chan struct{}
	redial   chan struct{} // the server dropped a live subscription
	stop     chan struct{}
}

type op struct {
	subscribe bool
	name      string
}

// newConn starts a connection's goroutine. Called with s.mu held.
func (s *Subscriber) newConn(key uint16) *conn {
	cn := &conn{
		s:        s,
		key:      key,
		channels: make(map[string]*channel),
		kick:     make(chan struct{}, 1),
		redial:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	s.wg.Add(1)
	go cn.run()
	return cn
}

// queue adds an op for the goroutine to send. Called with s.mu held.
func (cn *conn) queue(o op) {
	cn.ops = append(cn.ops, o)
	select {
	case cn.kick <- struct{}{}:
	default:
	}
}

// run dials, serves and, when the connection is lost, dials again, waiting
// longer after each dial that did not come up (retryDelay doubled, up to
// maxRetryDelay). An outage is told to the subscriber's Health: Down when
// a working connection is lost and at each dial that fails after, Up when
// one works again.
func (cn *conn) run() {
	defer cn.s.wg.Done()
	lost := false // a working connection was lost, and none works yet
	pause := time.Duration(0)
	for attempt := 0; ; attempt++ {
		d, release := cn.s.rdb.Dedicate()
		closed := d.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage:      cn.onMessage,
			OnSubscription: cn.onSubscription,
		})
		if attempt > 0 {
			cn.resubscribe()
		}
		worked, err := cn.serve(d, closed, func() {
			if lost {
				lost = false
				cn.s.health.Up(cn.key)
			}
		})
		release()
		switch {
		case worked && err != nil:
			pause = 0
			lost = true
			cn.s.health.Down(cn.key, err)
		case worked:
			pause = 0
		case lost && err != nil:
			cn.s.health.Down(cn.key, err)
		}
		pause = doubled(pause, retryDelay, maxRetryDelay)
		select {
		case <-cn.stop:
			return
		case <-time.After(pause):
		}
	}
}

// doubled returns d doubled, within [lo, hi].
func doubled(d, lo, hi time.Duration) time.Duration {
	return min(max(2*d, lo), hi)
}

// serve sends queued ops until the connection is lost (err says why), the
// server drops a subscription, or the subscriber closes. worked says
// whether any command got an answer; up is called after the first.
func (cn *conn) serve(d rueidis.DedicatedClient, closed <-chan error, up func()) (worked bool, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lostWith := make(chan error, 1)
	go func() {
		select {
		case <-cn.stop:
		case err := <-closed:
			lostWith <- err
		}
		cancel()
	}()
	for {
		select {
		case <-ctx.Done():
			d.Close()
			select {
			case err = <-lostWith:
			default:
			}
			return worked, err
		case <-cn.redial:
			d.Close()
			return worked, nil
		case <-cn.kick:
		}
		if cn.sendOps(ctx, d, &worked, up) {
			d.Close()
			return worked, nil
		}
	}
}

// sendOps sends d the subscribe and unsubscribe commands queued for it,
// and reports whether it must be dialled again. worked is set, and up
// called, at the first command Redis answers.
func (cn *conn) sendOps(ctx context.Context, d rueidis.DedicatedClient, worked *bool, up func()) (redial bool) {
	cn.s.mu.Lock()
	ops := cn.ops
	cn.ops = nil
	cn.s.mu.Unlock()
	for _, o := range ops {
		err := d.Do(ctx, cn.command(d, o)).Error()
		if _, isReply := rueidis.IsRedisErr(err); !*worked && (err == nil || isReply) {
			*worked = true
			up()
		}
		if err != nil && o.subscribe && moved(err) {
			// The channel's slot is served elsewhere now and rueidis's
			// map is stale (a dedicated connection does not follow
			// MOVED). A keyed command in the slot makes rueidis follow
			// the redirect and refresh its map; then dial again and
			// resubscribe every channel there.
			cn.s.rdb.Do(ctx, cn.s.rdb.B().Exists().Key(o.name).Build())
			return true
		}
		if err != nil && o.subscribe {
			cn.failed(o.name, err)
		}
	}
	return false
}

func (cn *conn) command(d rueidis.DedicatedClient, o op) rueidis.Completed {
	switch {
	case cn.s.mode == Sharded && o.subscribe:
		return d.B().Ssubscribe().Channel(o.name).Build()
	case cn.s.mode == Sharded:
		return d.B().Sunsubscribe().Channel(o.name).Build()
	case o.subscribe:
		return d.B().Subscribe().Channel(o.name).Build()
	}
	return d.B().Unsubscribe().Channel(o.name).Build()
}

// moved reports whether err redirects to another node: the cluster moved
// the slot, or is moving it, or failed over.
func moved(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, isMoved := re.IsMoved()
	_, isAsk := re.IsAsk()
	return isMoved || isAsk || re.IsTryAgain() || re.IsClusterDown()
}

// failed ends a subscription that the server refused or could not receive.
// Its waiters get the error: those still in Subscribe as its result, the
// others (returned with ErrUnconfirmed, or queued before a reconnect) are
// marked failed and woken. A lost connection is retried by run.
func (cn *conn) failed(name string, err error) {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	ch := cn.channels[name]
	if ch == nil || ch.state != subscribing {
		return
	}
	if _, isReply := rueidis.IsRedisErr(err); !isReply {
		return // the connection broke; run resubscribes on the next one
	}
	cn.drop(name)
	ch.fail(err)
	for e := ch.waiters.Front(); e != nil; e = e.Next() {
		w := e.Value.(*Waiter)
		w.failed.Store(true)
		w.poke()
	}
}

// resubscribe queues a subscription of every channel on a new connection.
// Messages sent while disconnected are lost, so each channel's waiters are
// all woken once it is confirmed again; waiters arriving meanwhile wait for
// that confirmation.
func (cn *conn) resubscribe() {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	cn.ops = cn.ops[:0]
	for name, ch := range cn.channels {
		if ch.waiters.Len() == 0 {
			cn.drop(name)
			ch.fail(ErrClosed)
			continue
		}
		// Waiters who came while it was subscribing or unsubscribing
		// wait on a ready not yet settled: keep it, or they would wait
		// for a confirmation nobody will give. Only a live channel's
		// ready is settled already.
		if ch.state == live {
			ch.ready = make(chan struct{})
		}
		ch.state = subscribing
		ch.rewake = true
		cn.queue(op{subscribe: true, name: name})
	}
}

func (cn *conn) onMessage(m rueidis.PubSubMessage) {
	cn.s.mu.Lock()
	ch := cn.channels[m.Channel]
	var unclaimed func()
	if ch != nil {
		switch n := ch.wakes(m.Message); {
		case n == All:
			ch.wakeAll()
		case n == Grant:
			ch.grant(m.Message)
		case n > 0:
			unclaimed = ch.wake(n)
		}
	}
	cn.s.mu.Unlock()
	if unclaimed != nil {
		unclaimed()
	}
}

func (cn *conn) onSubscription(ev rueidis.PubSubSubscription) {
	cn.s.mu.Lock()
	defer cn.s.mu.Unlock()
	ch := cn.channels[ev.Channel]
	if ch == nil {
		return
	}
	switch ev.Kind {
	case "subscribe", "ssubscribe":
		if ch.state == subscribing {
			ch.state = live
			ch.settle()
			ch.wakeConfirmed()
		}
		// While unsubscribing, this confirms the subscribe sent before;
		// the unsubscribe's own confirmation follows.
	case "unsubscribe", "sunsubscribe":
		if ch.state == live {
			// Not asked for: the server dropped it, as Redis does to a
			// sharded channel whose slot moved to another node. Dial
			// again (a sharded connection follows its slot's node) and
			// resubscribe; waiters are woken once that is confirmed, in
			// case a release went by unheard.
			cn.s.log.Info("relock: the server dropped a subscription (slot moved?); resubscribing", "channel", ev.Channel)
			select {
			case cn.redial <- struct{}{}:
			default:
			}
			return
		}
		if ch.state != unsubscribing {
			return
		}
		if ch.waiters.Len() == 0 {
			cn.drop(ev.Channel)
			ch.settle()
			return
		}
		// Waiters came back while it was being dropped: subscribe again.
		ch.state = subscribing
		cn.queue(op{subscribe: true, name: ch.name})
	}
}

// drop forgets channel name. Called with s.mu held.
func (cn *conn) drop(name string) {
	delete(cn.channels, name)
	cn.s.channels.Add(-1)
}
