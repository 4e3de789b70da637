package reentrant

import (
	"time"

	"github.com/relock-go/relock/scripts"
)

// Directed wakes: relock's addition to Redisson's protocol for plain and
// fenced locks (docs/waiting.md). A release publishes "0" on Redisson's
// channel, and every client listening there wakes one of its waiters: with
// n clients waiting, n attempts for one free lock. So relock clients listen
// on a channel of their own instead, and register in the lock's waiters'
// set when an attempt fails (in that same script); a relock release, besides
// publishing for Redisson's waiters, tells the client registered longest.
// Nothing depends on the message: the re-poll bound holds as before.
//
//   - A message that reaches no one is known at once: the script sees that
//     nobody heard it (PUBLISH's count), drops that client and tells the next.
//   - A message that reaches a client with no waiter left to take it is
//     passed on by that client (passOn).
//   - A client whose waiter takes the lock moves to the end of the set if it
//     has other waiters, and leaves it if not.
//   - Releases by anything else (Java Redisson's unlock or forceUnlock, an
//     older relock, a deleted key's holder) publish only on Redisson's
//     channel, so every waiting client listens there too. A relock release
//     marks its message there as told (pubsub.WakeTold, which Java reads as
//     0), and relock waiters let it pass: only the client it told wakes.
//   - So a release whose message nobody heard on Redisson's channel has
//     nobody to tell directly, and does not look: each waiting client
//     subscribed there before its last look at the lock.
//
// The scripts must be able to count who hears a channel: so not with
// classic pub/sub on a cluster, where a subscriber may sit on any node and
// PUBLISH counts only its own; there every waiter listens on Redisson's
// channel, as Redisson's do.

// passOn hands on a directed wake for lock name that found no waiter of c
// to take it (see scripts.PassOn), which takes c out of the lock's waiters'
// set. A waiter of c that joined the wake channel meanwhile may have made
// its attempt, which left c registered, before the pass-on ran (the two go
// out on different connections): it would sleep unregistered. So, once the
// pass-on has run, a waiter of c's is nudged to try again, which registers
// c anew. It does not block.
func (h *handoffs) passOn(name string) func() {
	return func() {
		h.background(func() {
			ctx, cancel := cleanup(h.closing)
			defer cancel()
			// A drop, as a win's SettleDrop (see waitstate.Drops).
			defer h.drops.Sending()()
			if err := scripts.PassOn(ctx, h.runner.conn(), name, h.id, h.publish, h.listensFor(name)); err != nil {
				h.log.Debug("relock: passing on a wake", "lock", name, "error", err)
			}
			h.sub.Nudge(scripts.WakeChannel(name, h.id))
		})
	}
}

// listensFor is how long at least c will still listen on lock name's
// Redisson channel, counted from now (see scripts.Offer.Listens): 0 when
// it does not, and never less than a millisecond when it does, a
// subscription being unsubscribed included (a release may count it yet).
// A client that stops waiting stays in the lock's waiters' set for that
// long, as a mark, so that a release counts it among the listeners that
// are not Java waiters.
func (h *handoffs) listensFor(name string) time.Duration {
	if h.sub.Idle() { // the uncontended path: no channel name built
		return 0
	}
	d, subscribed := h.sub.ListensFor(scripts.LockChannel(name))
	if !subscribed {
		return 0
	}
	return max(d, time.Millisecond)
}
