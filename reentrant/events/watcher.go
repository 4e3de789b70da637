package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

// watcher is one Watch: what it last read of the key, and where it is in
// the key's notifications.
type watcher struct {
	rt   addon.Runtime
	key  string
	opts Options
	out  chan Event

	holders []reentrant.Holder // as of the last exact read
	count   int64
	dirty   bool   // a change since the last exact read
	prev    string // the last notification, to tell a release's DEL
}

// subscription is the watch's connection: subscribed to the key's
// notifications, and read on, so that a read's reply comes after every
// notification published before the read ran and before every one
// published after (one connection, in order: this is what needs RESP3).
type subscription struct {
	d       rueidis.DedicatedClient
	release func()
	closed  <-chan error
	q       *queue
}

// subscribe dials the key's node, checks its notifications, and
// subscribes.
func (w *watcher) subscribe(ctx context.Context) (*subscription, error) {
	d, release := w.rt.Conn().Client.Dedicate()
	s := &subscription{d: d, release: release, q: newQueue()}
	s.closed = d.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) { s.q.push(m.Message) }})
	// On a cluster the first keyed command picks the connection's node:
	// the key's master, where its notifications are published.
	err := d.Do(ctx, d.B().Exists().Key(w.key).Build()).Error()
	if err == nil && !w.opts.Unchecked {
		err = checkNotifications(ctx, d, w.opts.EnableNotifications)
	}
	if err == nil {
		err = d.Do(ctx, w.subscription(ctx, d)).Error()
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *subscription) close() {
	s.d.Close()
	s.release()
}

// subscription subscribes to the key's notifications in the connection's
// database, whose number CLIENT INFO tells: a SUBSCRIBE, which an ACL
// rule &__keyspace@*__:* allows. Where CLIENT INFO is refused (an older
// server, or a user without +client|info) it subscribes to the pattern of
// every database's, which an ACL allows only by that very pattern, or
// allchannels (Redis matches a PSUBSCRIBE's pattern literally).
func (w *watcher) subscription(ctx context.Context, d rueidis.DedicatedClient) rueidis.Completed {
	info, err := d.Do(ctx, d.B().ClientInfo().Build()).ToString()
	if err == nil {
		for _, f := range strings.Fields(info) {
			if db, ok := strings.CutPrefix(f, "db="); ok {
				return d.B().Subscribe().Channel("__keyspace@" + db + "__:" + w.key).Build()
			}
		}
	}
	return d.B().Psubscribe().Pattern(pattern(w.key)).Build()
}

// pattern matches the key's notifications in any database, the key's
// glob characters escaped.
func pattern(key string) string {
	var b strings.Builder
	b.WriteString("__keyspace@*__:")
	for _, r := range key {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// start reads the holders the watch starts from. Notifications that
// arrive while the read is in flight may be of changes after it, so it is
// read again, until one read overlaps none.
func (w *watcher) start(ctx context.Context, s *subscription) error {
	for i := 1; ; i++ {
		s.q.take() // before the read: in it
		holders, count, err := read(ctx, s.d, w.key)
		if err != nil {
			s.close()
			return err
		}
		if s.q.empty() || i == tries {
			w.holders, w.count = holders, count
			return nil
		}
	}
}

// run serves the watch until ctx ends or the Client closes, subscribing
// again after each lost connection, with a pause that doubles up to a
// second.
func (w *watcher) run(ctx context.Context, s *subscription) {
	defer close(w.out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(w.rt.Closing, cancel)()
	for {
		err := w.follow(ctx, s)
		s.close()
		if w.closed() || ctx.Err() != nil || !w.send(ctx, Event{Kind: Missed, Err: err}) {
			return
		}
		w.prev, w.dirty = "", true
		for pause := 10 * time.Millisecond; ; pause = min(2*pause, time.Second) {
			select {
			case <-ctx.Done():
				w.closed()
				return
			case <-time.After(pause):
			}
			if s, err = w.subscribe(ctx); err == nil {
				break
			}
		}
	}
}

// closed reports whether the Client closed, after telling the reader so:
// the last event, in place of one the reader has not taken, so that
// telling it never waits for the reader (Close waits for the watch).
func (w *watcher) closed() bool {
	if w.rt.Closing.Err() == nil {
		return false
	}
	ev := Event{Kind: Missed, Key: w.key, At: time.Now(), Err: fmt.Errorf("relock: watching %q: %w", w.key, reentrant.ErrClosed)}
	select {
	case w.out <- ev:
	default:
		select {
		case <-w.out:
		default:
		}
		w.out <- ev
	}
	return true
}

// errBehind is a Missed event's cause when the reader did not keep up.
var errBehind = errors.New("relock: the watch's reader fell behind; notifications were dropped")

// follow tells the key's changes until ctx ends (nil) or the connection
// is lost (its error).
func (w *watcher) follow(ctx context.Context, s *subscription) error {
	for {
		if w.dirty && s.q.empty() {
			if err := w.sync(ctx, s); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-s.closed:
			return cmp.Or(err, errors.New("relock: the watch's connection closed"))
		case <-s.q.ready:
		}
		names, dropped := s.q.take()
		if dropped {
			if !w.send(ctx, Event{Kind: Missed, Err: errBehind}) {
				return nil
			}
			w.prev, w.dirty = "", true
		}
		for _, n := range names {
			if !w.apply(ctx, n) {
				return nil
			}
		}
	}
}

// releasing are the notifications a release's script sends just before
// it deletes the key: the last hold taken off the hash (HINCRBY, HDEL), a
// latch's count (DECRBY), a handoff's grant nobody heard (HSET). A DEL
// right after one of them is the release's; any other DEL (a force
// unlock's, Delete's, a DEL at a shell) is someone else's.
var releasing = map[string]bool{"hincrby": true, "hdel": true, "hset": true, "decrby": true, "incrby": true}

// apply takes one notification: an expiry or deletion is told at once,
// with the holders last read; any other change is read once the
// notifications pending are taken. It reports false when ctx ended.
func (w *watcher) apply(ctx context.Context, name string) bool {
	gone, changed := classify(w.prev, name)
	w.prev = name
	w.dirty = w.dirty || changed
	if gone == "" {
		return true
	}
	held := w.holders
	w.holders, w.count = nil, 0
	return w.send(ctx, Event{Kind: gone, Holders: held})
}

// classify reads notification name, after prev: the key expired or was
// deleted (gone), or its holders or count may have changed (changed).
func classify(prev, name string) (gone Kind, changed bool) {
	switch {
	case name == "expired":
		return Expired, false
	case name == "evicted" || name == "del" && !releasing[prev]:
		return Deleted, false
	case name == "expire" || name == "persist":
		return "", false // a renewal or a new TTL: no holder came or went
	}
	return "", true
}

// tries bounds the reads sync makes before it takes one that overlapped
// an expiry or deletion: under constant change, holders are then
// approximate.
const tries = 5

// sync reads the key and tells what changed since the last read. Each
// read is the key's state at some moment after the last, so the holders
// that came and went between the two are told. A read that overlapped
// notifications (they arrived while it was in flight) is read again after
// they are applied; and when one of them was an expiry or a deletion,
// which may have come before or after it, it is not told: that one's
// holders are those of the read before.
func (w *watcher) sync(ctx context.Context, s *subscription) error {
	for i := 1; w.dirty; i++ {
		w.dirty = false
		holders, count, err := read(ctx, s.d, w.key)
		if err != nil {
			return err
		}
		names, _ := s.q.take()
		if !w.overlapsGone(names) || i >= tries {
			if err := w.tell(ctx, holders, count); err != nil {
				return err
			}
		}
		for _, n := range names {
			if !w.apply(ctx, n) {
				return nil
			}
		}
	}
	return nil
}

// overlapsGone reports whether names, following the last applied, hold
// an expiry or a deletion.
func (w *watcher) overlapsGone(names []string) bool {
	prev := w.prev
	for _, n := range names {
		if gone, _ := classify(prev, n); gone != "" {
			return true
		}
		prev = n
	}
	return false
}

// tell sends the differences from the last read to this one: holders gone
// (Released), holders new (Acquired), a new count (Changed).
func (w *watcher) tell(ctx context.Context, holders []reentrant.Holder, count int64) error {
	for _, h := range w.holders {
		if !slices.ContainsFunc(holders, same(h)) && !w.send(ctx, Event{Kind: Released, Holders: []reentrant.Holder{h}}) {
			return nil
		}
	}
	for _, h := range holders {
		if !slices.ContainsFunc(w.holders, same(h)) && !w.send(ctx, Event{Kind: Acquired, Holders: []reentrant.Holder{h}}) {
			return nil
		}
	}
	if count != w.count && len(holders) == 0 && !w.send(ctx, Event{Kind: Changed, Count: count}) {
		return nil
	}
	w.holders, w.count = holders, count
	return nil
}

// same matches a holder by who holds what, not by its count.
func same(h reentrant.Holder) func(reentrant.Holder) bool {
	return func(o reentrant.Holder) bool { return o.Owner == h.Owner && o.Value == h.Value && o.Write == h.Write }
}

// read reads the key's holders (a lock hash) or count (a number) in one
// round trip; either command fails with WRONGTYPE on the other layout,
// and a key that is neither (a list, a string that is no count) is
// reentrant.ErrWrongType.
func read(ctx context.Context, d rueidis.DedicatedClient, key string) ([]reentrant.Holder, int64, error) {
	r := d.DoMulti(ctx, d.B().Hgetall().Key(key).Build(), d.B().Get().Key(key).Build())
	fields, herr := r[0].AsStrMap()
	text, gerr := r[1].ToString()
	for _, err := range []error{herr, gerr} {
		if err != nil && !rueidis.IsRedisNil(err) && !scripts.IsWrongType(err) {
			return nil, 0, fmt.Errorf("relock: reading %q for its watch: %w", key, err)
		}
	}
	var count int64
	if gerr == nil {
		var err error
		if count, err = strconv.ParseInt(text, 10, 64); err != nil {
			return nil, 0, fmt.Errorf("relock: watching %q: %w: a string that is not a count", key, reentrant.ErrWrongType)
		}
	}
	if scripts.IsWrongType(herr) && scripts.IsWrongType(gerr) {
		return nil, 0, fmt.Errorf("relock: watching %q: %w: neither a lock nor a count", key, reentrant.ErrWrongType)
	}
	_, _, holders := reentrant.HoldersOf(fields)
	return holders, count, nil
}

// send sends ev, stamped, unless ctx ends first.
func (w *watcher) send(ctx context.Context, ev Event) bool {
	ev.Key, ev.At = w.key, time.Now()
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// queue holds the notifications the connection delivered and follow has
// not taken, up to maxQueued: past that, they are dropped and the reader
// told Missed.
type queue struct {
	mu      sync.Mutex
	names   []string
	dropped bool
	ready   chan struct{}
}

const maxQueued = 10000

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

func (q *queue) push(name string) {
	q.mu.Lock()
	if len(q.names) < maxQueued {
		q.names = append(q.names, name)
	} else {
		q.dropped = true
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) take() (names []string, dropped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	names, dropped = q.names, q.dropped
	q.names, q.dropped = nil, false
	return names, dropped
}

func (q *queue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.names) == 0 && !q.dropped
}
