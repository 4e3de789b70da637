// Package election elects one leader at a time among processes, on
// relock's fenced lock: the leader is the lock's holder, its term is the
// fencing token its hold drew, and it is told the moment it may no longer
// lead (its leading context is cancelled, as a held lock's is).
//
// An Election is what etcd's concurrency.Election and Kubernetes'
// leaderelection give, on the Redis a service already has:
//
//	etcd concurrency.Election   Kubernetes leaderelection   here
//	Campaign                    LeaderElector.Run (blocks)  Campaign
//	Proclaim                    (holder identity fixed)     Proclaim
//	Resign                      ReleaseOnCancel             Resign
//	Leader                      GetLeader                   Leader
//	Observe                     OnNewLeader                 Observe
//	lease revision              Lease resourceVersion       Term (fenced)
//	session TTL (60 s)          LeaseDuration (15 s)        WatchdogTimeout (30 s)
//
// The terms are the fenced lock's tokens (docs/fencing.md): they only grow,
// across leaders, clients and processes, Java's RFencedLock on the same
// name included, and across Redis losing its data. A store that keeps the
// largest term it has seen and refuses smaller ones turns away a leader
// that was paused or cut off past its lease; Fenced does that for Redis
// keys, and docs/election.md gives the SQL and object-store forms.
//
// The keys are the lock's (Redisson's RLock hash and its token counter)
// and relock's own record of the leader, relock_election:{name}, with its
// channel relock_election_channel:{name}.
package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/reentrant"
	"github.com/relock-go/relock/scripts"
)

// Term is a leader's term: the fencing token its hold of the election's
// lock drew. Every term is larger than every term before it.
type Term int64

// Leader is who leads an election. Owner is "" when nobody does; Term is
// then the last term there was (0 for none).
type Leader struct {
	Value string    // what the leader proclaimed
	Owner string    // the leader's reentrant.Owner, as text
	Term  Term      // its term
	Since time.Time // when its term began, on Redis's clock
}

// Errors an Election returns, besides reentrant's and the connection's.
var (
	// ErrNoLeader: nobody leads the election now.
	ErrNoLeader = errors.New("relock: no leader")
	// ErrNotLeader: the context passed as leading does not lead (it never
	// did, it resigned, or its leadership was lost to a newer term).
	ErrNotLeader = errors.New("relock: not the leader")
)

// Election is a handle on one election. It has no state of its own; its
// methods are safe for concurrent use.
type Election struct {
	lock  *reentrant.Lock
	conn  scripts.Conn
	pub   scripts.Publish
	hooks Hooks
}

// New returns a handle on the election name, run on c. rdb must be the
// client c was made with: the record of the leader and its announcements
// go through it. It is cheap and does nothing on Redis.
func New(c *reentrant.Client, rdb rueidis.Client, name string, opts ...Option) *Election {
	pub := scripts.PublishClassic
	if c != nil && c.PubSubMode() == reentrant.PubSubSharded {
		pub = scripts.PublishSharded
	}
	var lock *reentrant.Lock
	if c != nil {
		lock = c.FencedLock(name)
	}
	e := &Election{lock: lock, conn: scripts.Conn{Client: rdb}, pub: pub}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Name returns the election's name, as given to New ("" for a nil
// Election).
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.lock.Name()
}

// Campaign waits until ctx's owner (or one made for the call) leads, then
// records value as the leader's and announces it. It returns the leading
// context, which is cancelled the moment leadership may be lost (cause
// reentrant.ErrLockLost: the watchdog could not renew the hold in time),
// on Resign (context.Canceled) or on the client's Close; and the term.
// Give the leading context to Proclaim and Resign, and do the leader's
// work under it.
//
// The wait is the fenced lock's: no polling, woken by the release of the
// leader before (a Resign hands over within a wake-up), or, after a
// leader's process died, by its hold's expiry (at most
// Options.WatchdogTimeout). Its errors are Lock's: ctx's when it ends
// first, a connection error when Redis gives no answer, ErrClosed.
// Campaigning with a ctx that leads already re-enters: a new, larger term,
// and one Resign for each Campaign.
func (e *Election) Campaign(ctx context.Context, value string) (context.Context, Term, error) {
	if err := e.check(); err != nil {
		return nil, 0, err
	}
	leading, err := e.lock.Lock(ctx)
	if err != nil {
		return nil, 0, err
	}
	term, _ := reentrant.TokenFrom(leading)
	if err := e.proclaim(leading, value); err != nil {
		_ = e.lock.Unlock(leading)
		return nil, 0, err
	}
	return e.began(leading, Term(term)), Term(term), nil
}

// Proclaim changes the leader's value without an election: observers see
// the same term with the new value. It fails with ErrNotLeader when
// leading does not lead.
func (e *Election) Proclaim(leading context.Context, value string) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.proclaim(leading, value)
}

// proclaim records leading's owner and term with value.
func (e *Election) proclaim(leading context.Context, value string) error {
	owner, term, err := e.leadingOf(leading)
	if err != nil {
		return err
	}
	p, err := scripts.ElectionProclaim(context.WithoutCancel(leading), e.conn, e.lock.Key(), owner, int64(term), value, e.pub)
	switch {
	case err != nil:
		return fmt.Errorf("relock: election %q: proclaim: %w", e.Name(), err)
	case p != scripts.ProclaimOK:
		return fmt.Errorf("relock: election %q: %w", e.Name(), ErrNotLeader)
	}
	return nil
}

// Resign ends leading's leadership at once: the record says nobody leads,
// observers are told, and the lock is released, which wakes the next
// candidate. Its result is Unlock's: reentrant.ErrLockLost when the
// leadership had been lost before (work done after the loss was not
// protected), ErrNotLeader when leading never led.
func (e *Election) Resign(leading context.Context) error {
	if err := e.check(); err != nil {
		return err
	}
	owner, term, err := e.leadingOf(leading)
	if err != nil {
		return err
	}
	// The record first: an observer that sees the lock free and reads the
	// record must not find this leader in it. A failure here is told by
	// the Unlock after: the record names an owner that holds nothing then,
	// which Leader reads as no leader.
	_, rerr := scripts.ElectionResign(context.WithoutCancel(leading), e.conn, e.lock.Key(), owner, int64(term), e.pub)
	err = e.lock.Unlock(leading)
	resigned(leading, err)
	if err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("relock: election %q: resign: %w", e.Name(), rerr)
	}
	return nil
}

// Leader returns who leads now, or ErrNoLeader. It reads Redis: the owner
// on record must still hold the lock.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.check(); err != nil {
		return Leader{}, err
	}
	l, _, err := e.read(ctx)
	if err != nil {
		return Leader{}, err
	}
	if l.Owner == "" {
		return l, fmt.Errorf("relock: election %q: %w", e.Name(), ErrNoLeader)
	}
	return l, nil
}

// read returns the leader on record and how long its hold has left.
func (e *Election) read(ctx context.Context) (Leader, time.Duration, error) {
	r, err := scripts.ElectionRead(ctx, e.conn, e.lock.Key())
	if err != nil {
		return Leader{}, 0, fmt.Errorf("relock: election %q: %w", e.Name(), err)
	}
	return Leader{Value: r.Value, Owner: r.Owner, Term: Term(r.Term), Since: r.Since}, r.TTL, nil
}

// leadingOf returns the owner and term a leading context carries.
func (e *Election) leadingOf(leading context.Context) (string, Term, error) {
	if leading == nil {
		return "", 0, fmt.Errorf("relock: %w: nil context", reentrant.ErrInvalidArgument)
	}
	owner, ok := reentrant.OwnerFrom(leading)
	term, fenced := reentrant.TokenFrom(leading)
	if !ok || !fenced {
		return "", 0, fmt.Errorf("relock: election %q: %w (pass the context Campaign returned)", e.Name(), ErrNotLeader)
	}
	return owner.String(), Term(term), nil
}

// check returns why the handle cannot be used.
func (e *Election) check() error {
	if e == nil || e.lock == nil || e.conn.Client == nil {
		return fmt.Errorf("relock: %w: an Election from a nil Client or rueidis client", reentrant.ErrInvalidArgument)
	}
	return nil
}
