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
	"github.com/relock-go/relock/reentrant/internal/addon"
	"github.com/relock-go/relock/scripts"
)

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
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader: the context passed as leading does not lead (it never
	// did, it resigned, or its leadership was lost to a newer term).
	ErrNotLeader = errors.New("not the leader")
)

// Election is a handle on one election. It has no state of its own; its
// methods are safe for concurrent use.
type Election struct {
	c        *reentrant.Client
	lock     *reentrant.Lock
	rt       addon.Runtime
	hooks    Hooks
	progress time.Duration
	healthy  func(context.Context) error
	invalid  error // why the Options were refused; every call returns it

	leaveOnRequest bool
}

// Options set how New makes an Election. The zero Options are the
// defaults.
type Options struct {
	// Hooks are told when this process's leadership begins and ends.
	Hooks Hooks
	// ProgressWithin, if set, is how often a leader must show that it is
	// still at work, or stop leading: a leader that goes this long without
	// a reentrant.Progress on its leading context (or a passing Healthy)
	// gives leadership up at once, its leading context ending with
	// reentrant.ErrStalled, and the next candidate leads (see
	// reentrant.ProgressWithin). So a leader that hangs does not keep
	// leading for as long as its process lives. At least 1ms.
	ProgressWithin time.Duration
	// Healthy, with ProgressWithin, checks the leader's health: a
	// candidate runs it before it campaigns, and does not campaign while it
	// fails (Campaign returns its error); a leader runs it every third of
	// ProgressWithin, with its leading context, and each nil it returns
	// counts as progress. A check that fails or does not return in time
	// counts as none; one that panics while leading is recovered and
	// logged, and no check runs after it, so the leader stalls within
	// ProgressWithin. It should return when its ctx ends. Healthy without
	// ProgressWithin has no period to run at: every call of the Election
	// then fails with reentrant.ErrInvalidArgument.
	Healthy func(ctx context.Context) error
	// LeaveOnRequest makes Run, when its leader is asked to resign
	// (RequestResign), resign and return an error wrapping
	// ErrResignRequested, instead of campaigning again.
	LeaveOnRequest bool
}

// New returns a handle on the election name, run on c: its lock, its
// record of the leader and its announcements go through c, with c's
// replica sync and channel rights, and c's Close ends what the handle
// started. It is cheap and does nothing on Redis. A nil c or an empty
// name gives a handle whose every call fails with
// reentrant.ErrInvalidArgument, and so do Options with Healthy but no
// ProgressWithin.
func New(c *reentrant.Client, name string, opts Options) *Election {
	rt, ok := addon.Of(c)
	e := &Election{c: c, rt: rt, hooks: opts.Hooks, progress: opts.ProgressWithin, healthy: opts.Healthy, leaveOnRequest: opts.LeaveOnRequest}
	if opts.Healthy != nil && opts.ProgressWithin == 0 {
		e.invalid = fmt.Errorf("relock: election %q: %w: Options.Healthy needs Options.ProgressWithin, the deadline its checks keep", name, reentrant.ErrInvalidArgument)
	}
	if ok && name != "" {
		e.lock = c.FencedLock(name)
	}
	return e
}

// Name returns the election's name, as given to New ("" for a nil
// Election or one New refused).
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.lock.Name()
}

// Campaign waits until ctx's owner (or one made for the call) leads, then
// records value as the leader's and announces it. It returns the leading
// context, which is cancelled the moment leadership may be lost (cause
// reentrant.ErrLockLost: the watchdog could not renew the hold in time,
// or Resign found it lost), when the leader stalls (reentrant.ErrStalled,
// with Options.ProgressWithin), on Resign (context.Canceled) or on the
// client's Close (reentrant.ErrClosed), when RequestResign asks it to
// step down (ErrResignRequested: finish, then Resign, which hands over
// as asked); and the term. Give the leading context to Proclaim and
// Resign, and do the leader's work under it.
//
// From its start until it fails, or, once it leads, until its leadership
// ends, the Campaign stands: Candidates lists it under ctx's owner.
//
// The wait is the fenced lock's: no polling, woken by the release of the
// leader before (a Resign hands over within a wake-up), or, after a
// leader's process died, by its hold's expiry (at most
// Options.WatchdogTimeout). Its errors are Lock's: ctx's when it ends
// first, a connection error when Redis gives no answer, ErrClosed.
// Campaigning with a ctx that leads this election already is refused
// with reentrant.ErrReentry: one leadership, one term, one Resign.
func (e *Election) Campaign(ctx context.Context, value string) (context.Context, Term, error) {
	if err := e.check(ctx); err != nil {
		return nil, 0, err
	}
	if leadershipOf(ctx, e.lock.Key(), true) != nil {
		return nil, 0, fmt.Errorf("relock: election %q: %w: ctx leads it already (resign first)", e.Name(), reentrant.ErrReentry)
	}
	var opts []reentrant.LockOption
	if e.progress != 0 {
		opts = append(opts, reentrant.ProgressWithin(e.progress))
		if e.healthy != nil {
			if err := e.healthy(ctx); err != nil {
				return nil, 0, fmt.Errorf("relock: election %q: not campaigning: the health check failed: %w", e.Name(), err)
			}
		}
	}
	owner, ok := reentrant.OwnerFrom(ctx)
	if !ok {
		owner = e.c.NewOwner()
		ctx = reentrant.WithOwner(ctx, owner)
	}
	cand, err := stand(ctx, e.rt, e.lock.Key(), e.Name(), e.fail, owner, e.c.NewOwner(), value)
	if err != nil {
		return nil, 0, err
	}
	held, err := e.lock.Lock(ctx, opts...)
	if err != nil {
		cand.leave()
		return nil, 0, err
	}
	token, _ := reentrant.TokenFrom(held)
	l := &leadership{name: e.Name(), hooks: e.hooks, rt: e.rt, key: e.lock.Key(), owner: owner.String(), term: Term(token), held: held, outer: leadershipOf(ctx, "", true), cand: cand}
	if err := e.proclaim(ctx, l, value); err != nil {
		_ = e.lock.Unlock(held)
		cand.leave()
		return nil, 0, err
	}
	leading := l.begin()
	e.rt.Go(func() { l.heed(leading, e.fail) })
	if e.progress > 0 && e.healthy != nil {
		e.rt.Go(func() { e.checkHealth(leading) })
	}
	return leading, l.term, nil
}

// checkHealth runs Healthy every third of ProgressWithin while leading
// lasts, and counts each nil as the leader's progress. A check that
// panics ends the checks: no progress is reported after it, and the
// leader stalls.
func (e *Election) checkHealth(leading context.Context) {
	t := time.NewTicker(max(e.progress/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-leading.Done():
			return
		case <-t.C:
			var err error
			if e.rt.Guard.Run("election Options.Healthy", func() { err = e.healthy(leading) }) != nil {
				return
			}
			if err == nil {
				reentrant.Progress(leading)
			}
		}
	}
}

// Proclaim changes the leader's value without an election: observers see
// the same term with the new value. It fails with ErrNotLeader when
// leading does not lead.
func (e *Election) Proclaim(leading context.Context, value string) error {
	if err := e.check(leading); err != nil {
		return err
	}
	l, err := e.leadingOf(leading)
	if err != nil {
		return err
	}
	return e.proclaim(leading, l, value)
}

// proclaim records l's owner and term with value.
func (e *Election) proclaim(ctx context.Context, l *leadership, value string) error {
	recorded, err := scripts.ElectionProclaim(context.WithoutCancel(ctx), e.rt.Conn(), l.key, l.owner, int64(l.term), value, e.rt.Publish)
	switch {
	case err != nil:
		return e.fail("proclaim", err)
	case !recorded:
		return fmt.Errorf("relock: election %q: %w", e.Name(), ErrNotLeader)
	}
	return nil
}

// Leader returns who leads now, or ErrNoLeader. It reads Redis: the owner
// on record must still hold the lock.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.check(ctx); err != nil {
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
	r, err := scripts.ElectionRead(ctx, e.rt.Conn(), e.lock.Key())
	if err != nil {
		return Leader{}, 0, e.fail("read", err)
	}
	return Leader{Value: r.Value, Owner: r.Owner, Term: Term(r.Term), Since: r.Since}, r.TTL, nil
}

// leadingOf returns the leadership of this election leading carries.
func (e *Election) leadingOf(leading context.Context) (*leadership, error) {
	l := leadershipOf(leading, e.lock.Key(), false)
	if l == nil {
		return nil, fmt.Errorf("relock: election %q: %w (pass the context its Campaign returned)", e.Name(), ErrNotLeader)
	}
	return l, nil
}

// check returns why the handle cannot be used with ctx.
func (e *Election) check(ctx context.Context) error {
	switch {
	case e == nil || e.lock == nil:
		return fmt.Errorf("relock: %w: an Election of a nil Client, of one not made by reentrant.New, or with an empty name", reentrant.ErrInvalidArgument)
	case e.invalid != nil:
		return e.invalid
	case ctx == nil:
		return fmt.Errorf("relock: election %q: %w: nil context", e.Name(), reentrant.ErrInvalidArgument)
	}
	if e.rt.Closing.Err() != nil {
		return e.closed()
	}
	return nil
}

// closed is what the handle's calls return after the Client's Close.
func (e *Election) closed() error {
	return fmt.Errorf("relock: election %q: %w", e.Name(), reentrant.ErrClosed)
}

// rights are the ACL rules an election needs beside a lock's, as
// docs/deployment.md gives them.
const rights = "+hmget"

// fail names the election and what failed in err, and tells relock's
// errors by their sentinels: a key of another type (a record or lock
// overwritten), a right the Redis user lacks, a closed client.
func (e *Election) fail(op string, err error) error {
	switch {
	case scripts.IsWrongType(err):
		return fmt.Errorf("relock: election %q: %s: %w (%w)", e.Name(), op, reentrant.ErrWrongType, scripts.Tidy(err))
	case scripts.IsNoPermission(err):
		return fmt.Errorf("relock: election %q: %s: %w: an election needs %s beside a lock's rights (docs/deployment.md) (%w)", e.Name(), op, reentrant.ErrNoPermission, rights, scripts.Tidy(err))
	case errors.Is(err, rueidis.ErrClosing):
		return fmt.Errorf("relock: election %q: %s: %w (%w)", e.Name(), op, reentrant.ErrClosed, err)
	}
	return fmt.Errorf("relock: election %q: %s: %w", e.Name(), op, err)
}
