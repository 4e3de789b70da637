// Package events tells a program what happens to a lock or synchronizer of
// relock's, or of Redisson's on the same Redis: who acquired it, who
// released it, when it expired with a holder in it (a holder that died or
// stalled), and when someone else deleted it (a force unlock, DEL).
//
// Events come from Redis's keyspace notifications, as Redisson's object
// listeners do, so the server must publish them: notify-keyspace-events
// must include K, g, x, h and $ ("Kgxh$", or "KA"). Watch checks that on
// the key's node and fails with ErrNotificationsOff when it does not; it
// turns them on only when asked (EnableNotifications), since they cost the
// server a publish per change of every key.
//
// Redisson's RObject.addListener tells an ExpiredObjectListener and a
// DeletedObjectListener; the same changes reach a Watch as:
//
//	Redisson                        here
//	ExpiredObjectListener.onExpired Expired (with the holders last seen)
//	DeletedObjectListener.onDeleted Released (the last hold given back:
//	                                 Redisson deletes the key then too),
//	                                 Deleted (anything else that deleted it)
//	(none)                          Acquired, Changed, Missed
package events

import (
	"errors"
	"time"

	"github.com/relock-go/relock/reentrant"
)

// Kind is what happened to the watched name.
type Kind string

// The kinds of Event.
const (
	// Acquired: a holder appeared (a lock's owner, a read lock's reader,
	// a group lock's value, a permit taken). Re-entries are not events.
	Acquired Kind = "acquired"
	// Released: a holder gave its last hold back, or the lock passed
	// from it to another (then an Acquired follows).
	Released Kind = "released"
	// Expired: the key's TTL ran out; Holders held it then, as last seen.
	// With holders, a holder died or stalled without releasing.
	Expired Kind = "expired"
	// Deleted: the key was deleted other than by a release: a force
	// unlock, Delete, DEL, or evicted under maxmemory. Holders held it
	// then, as last seen.
	Deleted Kind = "deleted"
	// Changed: a count changed (a semaphore's permits, a latch's count, a
	// rate limiter's permits left); Count is the new one.
	Changed Kind = "changed"
	// Missed: the watch lost its connection, or its reader fell so far
	// behind that notifications were dropped. Events between may be
	// missing; those that follow are what changed across the gap. After
	// the Client's Close the last event is a Missed whose Err is
	// reentrant.ErrClosed, and none follow.
	Missed Kind = "missed"
)

// Event is one change of a watched name.
type Event struct {
	Kind Kind
	// Key is the watched key (the name, mapped by Options.NameMapper).
	Key string
	// Holders is who the event is about: the one holder acquired or
	// released, or every holder last seen in a key that expired or was
	// deleted (none, when nobody held it or none was seen).
	Holders []reentrant.Holder
	// Count is a semaphore's, latch's or rate limiter's count after the
	// change (Changed).
	Count int64
	// At is when this process saw the change.
	At time.Time
	// Err is why events were Missed: the connection's error, the reader
	// falling behind, or the Client's Close.
	Err error
}

// Errors Watch returns, besides ctx's and the connection's.
var (
	// ErrNotificationsOff: the key's node does not publish the keyspace
	// notifications Watch needs; the error names the flags missing.
	ErrNotificationsOff = errors.New("relock: keyspace notifications are off")
	// ErrNotificationsUnknown: the node refused CONFIG GET (an ACL, a
	// managed Redis), so Watch could not check the notifications; set
	// Options.Unchecked if they are known to be on.
	ErrNotificationsUnknown = errors.New("relock: keyspace notifications could not be checked")
)

// Options set how Watch watches. The zero Options check the server's
// notifications and change nothing there.
type Options struct {
	// EnableNotifications lets Watch add the flags it needs to the key's
	// node's notify-keyspace-events (CONFIG SET, keeping those already
	// set) when they are missing. The change lasts until the node
	// restarts, and holds for that node only: set it in every node's
	// configuration for it to survive a failover.
	EnableNotifications bool
	// Unchecked skips the check of notify-keyspace-events, for a server
	// that refuses CONFIG but is known to publish the notifications.
	// Without them, the watch sees nothing.
	Unchecked bool
}
