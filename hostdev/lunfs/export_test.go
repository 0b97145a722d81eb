package lunfs

// RingPolls is the number of POLL requests answered over the ring.
func (s *Server) RingPolls() uint64 {
	if s.ring == nil {
		return 0
	}
	return s.ring.polls.Load()
}

// WorkerRequests is how many requests each /dev/fuse worker read; only
// once the mount has ended (Unmount).
func (s *Server) WorkerRequests() []uint64 {
	if s.dev == nil {
		return nil
	}
	var n []uint64
	for _, w := range s.dev.ws {
		n = append(n, w.requests)
	}
	return n
}
