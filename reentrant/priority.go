package reentrant

import (
	"time"
)

// strictAging is the aging that StrictPriority stands for: a level moves a
// place earlier by about 115 days, more than any two waiters' arrivals lie
// apart, and 255 levels of it keep every place within the 2^53 µs that a
// score holds exactly.
const strictAging = 10_000_000 * time.Second

// priorityAging is the aging a priority lock's places are computed with.
func (o Options) priorityAging() time.Duration {
	if o.StrictPriority {
		return strictAging
	}
	return o.PriorityAging
}
