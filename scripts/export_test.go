package scripts

// Names the tests use that the package keeps to itself.
var (
	Suffixed     = suffixed
	UnlockLatch  = unlockLatch
	FairQueue    = fairQueue
	FairTimeouts = fairTimeouts
)

// FairGrants is the key of a fair lock's grants.
var FairGrants = grants

// Waiters is the key of a plain lock's waiters' set (directed wakes).
var Waiters = waiters

// WaitersAndGrants is waitersAndGrants.
var WaitersAndGrants = waitersAndGrants

// The priority lock's keys, for tests that read them.
var (
	PriorityQueue   = priorityQueue
	PriorityWaiters = priorityWaiters
)

// CandidatesKey is the roll of an election's candidates.
var CandidatesKey = candidatesKey
