// Package pubsub wakes goroutines waiting for a Redis channel message, with
// one subscription per channel however many goroutines wait on it.
//
// A [Subscriber] owns the subscription connection of one client: one in
// classic mode (SUBSCRIBE), one per cluster slot in use in sharded mode
// (SSUBSCRIBE, where the slot's node must serve the channel). Each channel
// is subscribed when its first [Waiter] arrives and unsubscribed when its
// last one leaves. Subscriptions are confirmed by the server before
// [Subscriber.Subscribe] returns, so a waiter that subscribes and then checks
// its condition cannot miss a message sent after the check. One whose ctx
// ends first stays queued ([ErrUnconfirmed]) and is woken once the server
// confirms, to check again.
//
// What a message means is the channel's own: each subscription comes with
// a [Wakes] that reads a payload and says how many of the channel's
// waiters it wakes, the longest-waiting first among those not already
// woken. On a lock's channel ([LockWakes]) [WakeOne] wakes one waiter
// (a release: each client listening wakes one) and [WakeAll] every one (a
// writer left a read-write lock); semaphores, latches and directed wake
// channels have their own. After the connection is lost, the Subscriber
// dials again, with backoff, resubscribes every channel and wakes every
// waiter, since messages may have been missed; the loss is one warning in
// the log and the return one note.
//
// The package knows nothing of locks. Messages can be lost in transit, so a
// waiter must never rely on one alone: bound every wait.
package pubsub
