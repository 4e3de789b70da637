package reentrant

// Kind names a kind of lock or synchronizer wherever relock reports one:
// the hooks (Acquire, HoldEnd, Woken), Inspect's KeyInfo, and the relock
// command. Its values are stable: metrics use them as attributes.
type Kind string

// The kinds a call takes or awaits, reported by the hooks. Inspect reports
// them too, but for KindRead, KindWrite and KindSpin, which share another
// kind's keys (KindReadWrite; KindLock).
const (
	KindLock            Kind = "lock"             // Client.Lock: Redisson's RLock
	KindFenced          Kind = "fenced"           // Client.FencedLock: RFencedLock
	KindFair            Kind = "fair"             // Client.FairLock: RFairLock
	KindPriority        Kind = "priority"         // Client.PriorityLock: relock's own
	KindRead            Kind = "read"             // ReadWriteLock.ReadLock
	KindWrite           Kind = "write"            // ReadWriteLock.WriteLock
	KindSpin            Kind = "spin"             // Client.SpinLock: RSpinLock
	KindSemaphore       Kind = "semaphore"        // Semaphore: RSemaphore
	KindPermitSemaphore Kind = "permit-semaphore" // PermitExpirableSemaphore
	KindLatch           Kind = "latch"            // CountDownLatch: RCountDownLatch
	KindRate            Kind = "rate"             // RateLimiter: RRateLimiter
	KindGroup           Kind = "group"            // Client.GroupLock: RedissonFasterMultiLock
)

// The kinds only Inspect reports, for what a key alone cannot tell apart.
const (
	// KindReadWrite is a read-write lock's key, held by readers or a
	// writer.
	KindReadWrite Kind = "read-write"
	// KindSemaphoreOrLatch is a count nobody waits on: Redisson stores a
	// semaphore and a latch alike.
	KindSemaphoreOrLatch Kind = "semaphore-or-latch"
	// KindOther is a key of any other shape.
	KindOther Kind = "other"
)

// noun names the kind in errors: "lock", "semaphore", "latch" or "rate
// limiter".
func (k Kind) noun() string {
	switch k {
	case KindSemaphore, KindPermitSemaphore:
		return "semaphore"
	case KindLatch:
		return "latch"
	case KindRate:
		return "rate limiter"
	}
	return "lock"
}

// described names the kind in a message: "fair lock", "latch", "rate
// limiter".
func (k Kind) described() string {
	switch k {
	case KindPermitSemaphore:
		return "permit-expirable semaphore"
	case KindRate:
		return "rate limiter"
	case Kind(k.noun()):
		return string(k)
	}
	return string(k) + " " + k.noun()
}

// holds reports whether a call of the kind records a hold, which a
// HoldEnded ends: a lock's acquisition, or a permit.
func (k Kind) holds() bool {
	switch k {
	case KindSemaphore, KindLatch, KindRate:
		return false
	}
	return true
}
