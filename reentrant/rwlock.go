package reentrant

// ReadWriteLock is Redisson's RReadWriteLock: many readers or one writer.
// Both sides are reentrant, and a writer may also take the read side
// (downgrade: take the read lock, then release the write lock). A reader
// cannot upgrade: a read holder asking for the write side waits for itself.
//
// The lock is one hash: field "mode" ("read" or "write"), readers' fields
// "<owner>" and the writer's "<owner>:write" with their hold counts, and a
// key {name}:<owner>:rwlock_timeout:<k> per read hold. Releases are announced
// on redisson_rwlock:{name}: "0" when the last reader leaves (wakes one
// waiter per client), "1" when a writer leaves (wakes every waiter). The
// watchdog renews both sides.
type ReadWriteLock struct {
	read, write *Lock
}

// ReadWriteLock returns a handle on the read-write lock name.
func (c *Client) ReadWriteLock(name string) *ReadWriteLock {
	return &ReadWriteLock{
		read:  c.newLock(name, readLock),
		write: c.newLock(name, writeLock),
	}
}

// ReadLock returns the read side: a Lock that many owners can hold at once.
// Of a nil ReadWriteLock it is a nil Lock, whose methods return
// ErrInvalidArgument.
func (rw *ReadWriteLock) ReadLock() *Lock {
	if rw == nil {
		return nil
	}
	return rw.read
}

// WriteLock returns the write side: a Lock that excludes every other owner.
// Of a nil ReadWriteLock it is a nil Lock.
func (rw *ReadWriteLock) WriteLock() *Lock {
	if rw == nil {
		return nil
	}
	return rw.write
}
