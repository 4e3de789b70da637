package reentrant

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lock is a handle on one reentrant lock, Redisson's RLock: a Redis hash at
// key Name whose field is the holder's Owner and whose value is its hold
// count. Get one from Client.Lock, or from the constructor of another kind
// (FairLock, FencedLock, PriorityLock, SpinLock, GroupLock,
// NonReentrantLock, NonReentrantFairLock, ReadWriteLock). A Lock has no
// state of its own; all its methods are safe for concurrent use.
type Lock struct {
	r    lockRef
	wake waker  // how its waits are woken (see waker)
	read reader // what its inspections ask Redis (see reader)
}

// ref is what the machinery knows of l; nil for a nil Lock.
func (l *Lock) ref() *lockRef {
	if l == nil {
		return nil
	}
	return &l.r
}

// Name returns the lock's name as given to the Client ("" for a nil Lock):
// its key, unless Options.NameMapper maps it.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.r.given
}

// Key returns the Redis key of the lock's hash: Name mapped by
// Options.NameMapper ("" for a nil Lock). It is what redis-cli and
// scripts of one's own name, and what add-ons built on a Lock (such as
// package election) derive their keys from, so that they share its
// cluster slot.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.r.name
}

// Lock takes the lock, waiting while another owner holds it, and returns
// the held context: do the work under it, since it ends when the hold
// does, and give it to Unlock.
//
// The held context carries the owner (ctx's, or a new one). It is
// cancelled when the hold ends: by Unlock (cause context.Canceled, or the
// ErrLockLost Unlock returns when it finds the hold gone), by Close
// (ErrClosed), or the moment the client learns the lock may be lost
// (ErrLockLost; see context.Cause). An owner that holds the lock already
// takes it again at once; each Lock needs its own Unlock. Without LeaseFor
// the watchdog keeps the lock for as long as it is held.
//
// Its errors: ctx's, wrapped, when ctx ends first; ErrNotAcquired when a
// wait option (NoWait, WaitAtMost, RetryCount) ran out while others held
// the lock; ErrDeadlock when the owner is the one a waits-for cycle gives
// up (docs/deadlocks.md); one that wraps the connection's error when Redis
// gave no answer, never ErrNotAcquired; ErrClosed after Close;
// ErrWrongType, ErrInvalidArgument and Redis's refusals at once. The rest
// says how, and why.
//
// An acquire whose reply comes after the new hold's local deadline (a stall
// of 0.9 TTL) is not trusted, since the lock may be gone by then: one
// renewal asks Redis whether the hold is still there. If it is, it is kept,
// with its deadline counted from the renewal; if not, the wait goes on as
// after an attempt that found the lock taken (a call that would not wait
// returns an error that is not ErrNotAcquired).
//
// If ctx ends first, Lock returns promptly with ctx's error wrapped. An
// attempt in flight then is heard out in the background, and whatever it
// did (a hold taken, a fair queue joined) is undone once its reply comes,
// not before: an undo sent at once could reach Redis ahead of the attempt,
// on another of the client's connections. The wait options (NoWait,
// WaitAtMost, RetryCount) make it give up with ErrNotAcquired instead.
//
// How promptly: at once, but for a plain or non-reentrant lock's attempt
// sent alone. A call the client makes while it has no other in flight goes
// synchronously on a connection of its own (rueidis's fastest path, which
// its shared connections leave for good once they have served two calls
// at once); on a rueidis client wrapped in a type of the caller's (hooks,
// tracing), every call takes the wrapper's Do instead. Such an attempt
// ends at ctx's deadline, which is its socket's; cancelled before, its
// connection is closed under it, and Lock returns when its reply comes or
// rueidis has closed the socket, within a second while Redis is silent.
// What the cut attempt may have taken is given back once Redis answers.
// One wait heeds no ctx: a call alone that must first dial that connection
// (the client's first, or the first after it broke) waits for the dial,
// up to rueidis's Dialer.Timeout (5 s by default) when the server does not
// answer it.
//
// A waiting Lock rides out a failover or restart: a server that cannot run
// scripts for now (LOADING, READONLY, ...) is tried again after a backoff,
// and an attempt lost with its connection is undone (its hold, if it took
// one, released) before the wait goes on. Only an owner Lock made itself
// can be undone: with an owner from WithOwner, a lost attempt's error is
// returned, and a hold it may have taken expires after its TTL. Other
// errors from Redis (WRONGTYPE, a bad ACL) are returned at once. A wait
// that ends while Redis gives no answer returns an error that wraps the
// last connection error (and ctx's, if ctx ended it), never ErrNotAcquired:
// "held by someone else" and "could not reach Redis" are different answers.
func (l *Lock) Lock(ctx context.Context, opts ...LockOption) (context.Context, error) {
	return l.acquire(ctx, newAcquireConfig(-1, l.ref().kindOf(), opts))
}

// TryLock is Lock with NoWait unless the options say otherwise. It returns
// ok == false, with ctx and a nil error, when the lock was held by someone
// else for as long as the limits allowed; any other failure, an outage
// included, is an error.
func (l *Lock) TryLock(ctx context.Context, opts ...LockOption) (held context.Context, ok bool, err error) {
	r := l.ref()
	held, err = l.acquire(ctx, newAcquireConfig(0, r.kindOf(), opts))
	if errors.Is(err, ErrNotAcquired) {
		return ctx, false, nil
	}
	if err != nil {
		return ctx, false, err
	}
	return held, true, nil
}

// Unlock gives back one hold of ctx's owner: pass the context Lock
// returned. The last hold deletes the key and wakes a waiter; holds that
// remain keep their TTL. The newest acquisition's held context is
// cancelled. It blocks until Redis answers, for at most 10 s, whatever
// ctx's deadline or cancellation (a release sent alone has that deadline
// on its socket; see Lock).
//
// What its result says of the work done under the lock:
//   - nil: the hold was given back; the work ran under the lock, unless
//     the held context was cancelled before (see context.Cause).
//   - ErrLeaseEnded: a LeaseFor lease ended before Unlock: from its local
//     deadline the lock may have been another's, so work done after it was
//     not protected. Nothing is sent to Redis.
//   - ErrLockLost: the hold was lost (wrapping ErrNotRenewed or
//     ErrUnconfirmed), found so now or before: work done after the loss
//     was not protected.
//   - ErrNotHeld: the owner held nothing (the context Lock was given
//     instead of the one it returned, or a second Unlock); nothing changed.
//   - another error, wrapping the connection's or the server's: whether
//     the hold was given back is unknown; if not, it expires with its TTL.
//
// Unlock is cleanup, so ctx's cancellation does not stop it (the held
// context is often already cancelled); only its values are used. When a reply
// is lost it retries, with the same request id, which Redis answers from
// the unlock latch instead of releasing twice: for up to 10s, and never
// past the hold's local deadline (see LeaseDeadline), when the lock may
// have expired; the error then wraps ErrLockLost and the last attempt's
// error. The last hold's release of a plain, fair or priority lock writes
// no latch, so when its reply is lost and the retry finds the lock free,
// Unlock cannot tell that release from the hold lost meanwhile (a restart
// loses replies and data together), and says ErrLockLost. A hold this
// client has already declared lost (the held context was cancelled with
// ErrLockLost) is not sent for: Unlock returns that cause at once.
func (l *Lock) Unlock(ctx context.Context) error {
	return l.ref().unlock(ctx, releaseWindow)
}

// Do takes the lock, runs fn with the held context, and releases the lock,
// even when fn returns an error or panics (the panic goes on after the
// release). It returns fn's error joined with Unlock's. fn should watch its
// context: it is cancelled if the lock is lost.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...LockOption) (err error) {
	if fn == nil {
		return fmt.Errorf("relock: %w: Do with a nil func", ErrInvalidArgument)
	}
	held, err := l.Lock(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := l.Unlock(held); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(held)
}

// IsLocked reports whether anyone holds the lock; for a group lock, any of
// its values (Redisson's isLocked). A key of another type than a lock's
// hash is ErrWrongType.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	r := l.ref()
	if err := r.check(ctx, nil); err != nil {
		return false, err
	}
	return l.read.locked(ctx, r)
}

// IsHeld reports whether ctx's owner holds the lock. A ctx without an owner
// holds nothing.
func (l *Lock) IsHeld(ctx context.Context) (bool, error) {
	n, err := l.HoldCount(ctx)
	return n > 0, err
}

// HoldCount returns how many times ctx's owner holds the lock, as Redis
// counts it (0 when it does not); for a group lock, the fewest of its
// counts among the values, 0 unless it holds them all.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	r := l.ref()
	if err := r.check(ctx, nil); err != nil {
		return 0, err
	}
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return 0, nil
	}
	return l.read.holdCount(ctx, r, owner)
}

// RemainTTL returns how long the lock's key has left to live: 0 when the
// lock is free, NoExpiry when the key has no TTL; for a group lock, how
// long until the last hold of its values ends. A key of another type
// than a lock's hash is ErrWrongType.
func (l *Lock) RemainTTL(ctx context.Context) (time.Duration, error) {
	r := l.ref()
	if err := r.check(ctx, nil); err != nil {
		return 0, err
	}
	return l.read.remainTTL(ctx, r)
}

// ForceUnlock releases the lock whoever holds it and wakes a waiter; it
// reports whether the lock was held. With Options.ReplicaSync it waits for
// the replicas as a release does; a deletion they did not confirm still
// stands on the master (a failover before they have it can bring the lock
// back until its TTL ends). This client's own holds of it end at
// once: their held contexts are cancelled with cause ErrLockLost. A key of
// another type is left alone and reported as ErrWrongType; a hash is taken
// for a lock without a look at its fields, as Redisson does, so point
// ForceUnlock at lock names only. A group lock's ForceUnlock frees just
// its values, whoever holds them (Redisson's forceUnlock).
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) {
	r := l.ref()
	if err := r.check(ctx, nil); err != nil {
		return false, err
	}
	return l.read.forceUnlock(ctx, r)
}

// Lock returns a handle on the reentrant lock stored at key name. It is
// cheap and does nothing on Redis; handles with the same name are
// interchangeable.
func (c *Client) Lock(name string) *Lock {
	return c.newLock(name, plainLock)
}

// Do is c.Lock(name).Do(ctx, fn, opts...).
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...LockOption) error {
	return c.Lock(name).Do(ctx, fn, opts...)
}

// newLock returns a handle of kind k on the lock name.
// The kind's waker is resolved here, once: directed wakes need a client
// whose scripts can count who hears a channel, and without one the kind's
// channel serves.
func (c *Client) newLock(name string, k lockKind) *Lock {
	row := k.spec()
	wake := wakes[k]
	if row.directed && (c == nil || !c.directed) { // a nil Client fails every call
		wake = announced{}
	}
	return &Lock{r: lockRef{c: c, name: c.key(name), given: name, kind: k, row: row}, wake: wake, read: hashReader{}}
}

// wakes are how each kind's waits are woken (see waker), on a client whose
// scripts can count who hears a channel (Client.newLock resolves the
// others).
var wakes = [...]waker{
	plainLock:            directedWakes{},
	nonReentrantLock:     directedWakes{},
	fencedLock:           directedWakes{},
	readLock:             announced{},
	writeLock:            announced{},
	fairLock:             queued{listens: true},
	nonReentrantFairLock: queued{listens: true},
	priorityLock:         queued{listens: true},
	spinLock:             spinning{},
	groupLock:            groupWakes{},
}

// acquire takes the lock for a call with cfg (see lockRef.acquire), once
// the handle and ctx pass their check. ctx's owner is read once, here: it
// picks the waker and, if there is none, the cycle makes one.
func (l *Lock) acquire(ctx context.Context, cfg acquireConfig) (context.Context, error) {
	r := l.ref()
	if err := r.check(ctx, cfg.err); err != nil {
		return nil, err
	}
	owner, _ := OwnerFrom(ctx)
	return r.acquire(ctx, cfg, owner, l.wakerFor(owner, cfg))
}

// wakerFor is the waker of a call with cfg for owner (zero: one made for
// the call): the handle's; its polling one with a retry delay; watching
// for deadlocks when the owner may hold other locks (one made for the call
// holds nothing, so it cannot close a cycle of waits).
func (l *Lock) wakerFor(owner Owner, cfg acquireConfig) waker {
	w := l.wake
	if cfg.retryDelay != 0 {
		w = w.polling()
	}
	if !owner.IsZero() && cfg.wait != 0 && l.r.c.opts.DeadlockTimeout > 0 && !l.r.row.noDeadlocks {
		w = watchDeadlocks(w)
	}
	return w
}
