package scripts

// Derived holds the names Redisson derives from a lock's or synchronizer's
// name, for tools that look at them without running a script.
type Derived struct {
	FairQueue, FairTimeouts string // a fair lock's queue and deadlines
	Token                   string // a fenced lock's token counter
	PermitTimeouts          string // a permit-expirable semaphore's permits
	RateValue               string // a rate limiter's permits left (OVERALL)
	// A priority lock's queue and waiter records (relock's own).
	PriorityQueue, PriorityWaiters string
}

// DerivedNames returns the names derived from name.
func DerivedNames(name string) Derived {
	return Derived{
		FairQueue:       fairQueue(name),
		FairTimeouts:    fairTimeouts(name),
		Token:           tokenCounter(name),
		PermitTimeouts:  permitTimeouts(name),
		RateValue:       suffixed(name, "value"),
		PriorityQueue:   priorityQueue(name),
		PriorityWaiters: priorityWaiters(name),
	}
}
