// Package watchdog keeps held locks alive and says when one may be lost.
//
// One Watchdog serves a whole client with a single loop, not a goroutine or
// timer per lock. Every Timeout/3 it renews every lease marked for renewal,
// in batches of up to BatchSize that never mix groups (cluster slots), all
// batches of a round in one call of the renew function. It also owns every
// lease's local deadline: the time the last confirmed acquire or renewal was
// sent, plus its TTL, minus a safety margin (see [Deadline]). A lease is lost,
// and its OnLost called once, when a renewal reports it gone, or when its
// deadline passes unconfirmed, even while Redis does not answer. A lost lease
// is never renewed again.
//
// The package knows nothing of Redis or of lock kinds beyond the renew
// function it is given.
package watchdog
