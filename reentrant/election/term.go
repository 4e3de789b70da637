package election

// Term is a leader's term: the fencing token its hold of the election's
// lock drew. Every term is larger than every term before it.
type Term int64
