package reentrant

import (
	"context"
	"time"

	"github.com/relock-go/relock/scripts"

	"github.com/relock-go/relock/pubsub"
)

// lockKind says which of Redisson's lock layouts a Lock uses, and how it
// waits; kinds[k] says how.
type lockKind uint8

const (
	plainLock            lockKind = iota // RLock
	fencedLock                           // RFencedLock: each acquire draws a token
	readLock                             // RReadWriteLock's read side
	writeLock                            // RReadWriteLock's write side
	fairLock                             // RFairLock: waiters queue in Redis, in order
	spinLock                             // RSpinLock: RLock's layout, waiters back off
	priorityLock                         // relock's own: waiters queue by aged priority
	nonReentrantLock                     // RNonReentrantLock: RLock's layout, one hold at most
	nonReentrantFairLock                 // RNonReentrantFairLock: RFairLock's layout, one hold at most
	groupLock                            // RedissonFasterMultiLock: values of one hash, held all at once
)

// kind is everything that differs between the kinds of lock; waiting,
// holding, renewing and releasing with retries are shared.
type kind struct {
	kind Kind
	// renewer is the script that renews the kind's holds.
	renewer renewer
	// field is the hash field that records owner's holds; nil: owner
	// itself (a group lock's values are added to it: see lockRef.field).
	field func(owner string) string
	// channel is the channel on which owner, waiting for lock name, hears
	// releases (a group lock's waiters: see groupWakes.blocked).
	channel func(name, owner string) string
	// acquire runs the acquire script once.
	acquire acquirer
	// release runs the release script once; believes: it reads
	// scripts.Release.Believed.
	release  func(ctx context.Context, rdb scripts.Conn, r scripts.Release) (scripts.Released, error)
	believes bool
	// forceUnlock deletes the lock whoever holds it and wakes its waiters
	// (directed: one relock client too, see scripts.Wake).
	forceUnlock func(ctx context.Context, rdb scripts.Conn, name string, pub scripts.Publish, directed bool) (bool, error)
	// directed: its waits take directed wakes (directedWakes) on a client
	// whose scripts can count who hears a channel, and its releases tell
	// the next relock client directly; handsOn: and hand it the lock.
	directed, handsOn bool
	// spins: its releases announce nothing (its waiters poll: spinning).
	spins bool
	// A queued kind's waiters queue in Redis (see queued): one that gives
	// up leaves the queue (leave); turn is the turn a waiter is given.
	leave func(ctx context.Context, rdb scripts.Conn, key, owner string, turn time.Duration, pub scripts.Publish) error
	turn  func(o *Options, wait time.Duration) time.Duration
	// noDeadlocks: its waits register no edge for deadlock detection,
	// whose reading of a lock's holders does not fit its layout.
	noDeadlocks bool
	// guarded: its acquire script honors scripts.Acquire.Guard, so an
	// attempt of an owner made for the call needs no worker (runGuarded).
	guarded bool
}

var kinds = [...]kind{
	plainLock:        guarding(handingOn(rlockKind(KindLock, scripts.LockAcquire))),
	nonReentrantLock: guarding(rlockKind(KindLock, scripts.NonReentrantAcquire)),
	fencedLock:       rlockKind(KindFenced, scripts.FencedAcquire),
	readLock: {
		kind:        KindRead,
		channel:     rwChannel,
		acquire:     scripts.ReadAcquire,
		release:     scripts.ReadRelease,
		forceUnlock: forceUnlockOn(scripts.RWChannel, pubsub.WakeAll),
		// Read holds extend their timeout keys too.
		renewer: renewRead,
	},
	writeLock: {
		kind:        KindWrite,
		field:       scripts.WriteField,
		channel:     rwChannel,
		acquire:     scripts.WriteAcquire,
		release:     scripts.WriteRelease,
		forceUnlock: forceUnlockOn(scripts.RWChannel, pubsub.WakeAll),
	},
	groupLock:            groupKind(),
	fairLock:             fairKind(scripts.FairAcquire),
	nonReentrantFairLock: fairKind(scripts.NonReentrantFairAcquire),
	priorityLock: {
		kind:     KindPriority,
		channel:  scripts.PriorityChannel,
		acquire:  scripts.PriorityAcquire,
		release:  scripts.PriorityRelease,
		believes: true,
		forceUnlock: func(ctx context.Context, rdb scripts.Conn, name string, pub scripts.Publish, _ bool) (bool, error) {
			return scripts.PriorityForceUnlock(ctx, rdb, name, pub)
		},
		leave: scripts.PriorityLeave,
		turn:  (*Options).aliveWindow,
	},
	spinLock: {
		kind:        KindSpin,
		channel:     lockChannel,
		acquire:     scripts.LockAcquire,
		release:     scripts.LockRelease,
		believes:    true,
		forceUnlock: forceUnlockOn(scripts.LockChannel, pubsub.WakeOne),
		spins:       true,
		guarded:     true,
	},
}

// acquirer runs a kind's acquire script once.
type acquirer = func(ctx context.Context, rdb scripts.Conn, a scripts.Acquire) (scripts.Acquired, error)

// rlockKind is a kind of RLock's layout and wake-ups (the plain,
// non-reentrant and fenced locks), reported as k, taken with acquire.
func rlockKind(k Kind, acquire acquirer) kind {
	return kind{
		kind:        k,
		channel:     lockChannel,
		acquire:     acquire,
		release:     scripts.LockRelease,
		believes:    true,
		forceUnlock: forceUnlockOn(scripts.LockChannel, pubsub.WakeOne),
		directed:    true,
	}
}

// guarding returns k, whose acquire script takes a guard (kind.guarded).
func guarding(k kind) kind {
	k.guarded = true
	return k
}

// handingOn returns k, whose releases hand the lock on to a waiting
// client (see kind.handsOn).
func handingOn(k kind) kind {
	k.handsOn = true
	return k
}

// fairKind is a kind of RFairLock's layout and queue (the fair and
// non-reentrant fair locks), taken with acquire.
func fairKind(acquire acquirer) kind {
	return kind{
		kind:     KindFair,
		channel:  scripts.FairChannel,
		acquire:  acquire,
		release:  scripts.FairRelease,
		believes: true,
		// Waiters listen on their own channels: the head of the queue is
		// told.
		forceUnlock: fairForceUnlock,
		leave:       scripts.FairLeave,
		turn:        (*Options).fairTurn,
	}
}

func lockChannel(name, _ string) string { return scripts.LockChannel(name) }
func rwChannel(name, _ string) string   { return scripts.RWChannel(name) }
func (k lockKind) spec() *kind          { return &kinds[k] }

// fairForceUnlock deletes a fair lock and tells the head of its queue.
func fairForceUnlock(ctx context.Context, rdb scripts.Conn, name string, pub scripts.Publish, _ bool) (bool, error) {
	return scripts.FairForceUnlock(ctx, rdb, name, pub)
}

// forceUnlockOn deletes a lock and publishes message on its channel.
func forceUnlockOn(channel func(string) string, message string) func(context.Context, scripts.Conn, string, scripts.Publish, bool) (bool, error) {
	return func(ctx context.Context, rdb scripts.Conn, name string, pub scripts.Publish, directed bool) (bool, error) {
		return scripts.ForceUnlock(ctx, rdb, name, channel(name), message, pub, directed)
	}
}

// lockAttempt is what one run of a lock's acquire script did.
type lockAttempt struct {
	scripts.Acquired
	err error
}

// renewer names a script that renews holds.
type renewer uint8

const (
	renewLock      renewer = iota // renew.lua: the RLock layout's holds
	renewRead                     // readrenew.lua: read holds, and their timeout keys
	renewPermit                   // permitrenew.lua: permits
	renewGroupLock                // grouprenew.lua: group locks' values
)

// renewers are the renewal scripts, by renewer.
var renewers = [...]func(context.Context, scripts.Conn, time.Duration, [][]scripts.Held) ([][]bool, []error){
	renewLock:      scripts.Renew,
	renewRead:      scripts.ReadRenew,
	renewPermit:    scripts.PermitRenew,
	renewGroupLock: scripts.GroupRenew,
}

// groupKind is the group lock's kind.
func groupKind() kind {
	return kind{
		kind:    KindGroup,
		channel: lockChannel,
		acquire: scripts.GroupAcquire,
		release: scripts.GroupRelease,
		// Unused: Lock.ForceUnlock frees the handle's values only.
		forceUnlock: nil,
		believes:    true,
		renewer:     renewGroupLock,
		noDeadlocks: true,
	}
}
