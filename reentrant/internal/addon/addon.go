// Package addon is the seam between a reentrant.Client and the add-ons
// built on it (reentrant/election, reentrant/events, reentrant/fence,
// reentrant/quiet, reentrant/election/kube): what they run their scripts
// through and how they announce, so that a Client's promises (replica
// sync, no publishing for a user without channel rights, Close ending
// everything it started) hold for them as for a Lock.
//
// The rule for an add-on: one that needs the seam lives under reentrant/
// (Go lets nothing else import it); one that pulls a heavy dependency is a
// module of its own there (the kube module, for client-go), and since the
// seam is no API, such a module builds only against the relock it sits
// beside and is released in lockstep with it.
//
// Package reentrant fills in Of when it is loaded. It is a variable, not
// a method of Client, so that users, who cannot import this package, get
// nothing from it they could misuse.
package addon

import (
	"context"
	"log/slog"
	"time"

	"github.com/relock-go/relock/reentrant/internal/callback"
	"github.com/relock-go/relock/scripts"
)

// Runtime is what an add-on gets of a Client.
type Runtime struct {
	// Conn returns the connection for the next script: the Client's
	// rueidis client with its replica sync.
	Conn func() scripts.Conn
	// Publish is how the Client announces: PublishNone for a user with
	// no channel rights, whose add-ons then re-read instead of listening.
	Publish scripts.Publish
	// Closing is cancelled by the Client's Close.
	Closing context.Context
	// Go runs task on a goroutine that Close waits for, and reports
	// whether it started (not after Close). task must return soon after
	// Closed is closed.
	Go func(task func()) bool
	// Repoll is how often a waiter with no messages reads again
	// (Options.RepollInterval).
	Repoll time.Duration
	Logger *slog.Logger
	// Guard runs the user's callbacks on the add-on's own goroutines,
	// recovering their panics (logged with the Client's).
	Guard *callback.Guard
	// Key maps a name to its key (Options.NameMapper).
	Key func(name string) string
	// Fail is how the Client words a failed script of op on name: relock's
	// sentinels for a key of another type, a right the Redis user lacks, a
	// closed client, and one "relock:" prefix.
	Fail func(op, name string, err error) error
	// WithToken returns ctx carrying token as a fenced lock's token, as
	// reentrant.TokenFrom reads it.
	WithToken func(ctx context.Context, token int64) context.Context
	// LockAt returns a *reentrant.Lock, a plain lock, on key as it is
	// (Options.NameMapper is not applied): for an add-on's keys derived
	// from a key mapped already, which must stay in its hash slot.
	LockAt func(key string) any
	// GiveAway ends the hold behind held (the newest acquisition of it)
	// in this Client without its release: pass moves the lock on in
	// Redis in the release's place (an election's handover to a named
	// successor), given the lock's key, the owner's field and the TTL to
	// restore while other acquisitions of the hold remain. Once pass
	// returns, the watchdog no longer renews the hold and held is
	// cancelled (context.Canceled, or pass's error when it wraps
	// reentrant.ErrLockLost), as after Unlock. A held context of no hold
	// of this Client fails with reentrant.ErrNotHeld and runs nothing.
	GiveAway func(held context.Context, pass func(ctx context.Context, key, owner string, restore time.Duration) error) error
}

// Of returns the Runtime of c, a *reentrant.Client; false when c is not
// one made by reentrant.New.
var Of func(c any) (Runtime, bool)
