package pubsub

// Waiting returns how many waiters are queued on channel name.
func (s *Subscriber) Waiting(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, cn := range s.conns {
		if ch := cn.channels[name]; ch != nil {
			n += ch.waiters.Len()
		}
	}
	return n
}
