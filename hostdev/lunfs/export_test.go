package lunfs

// RingPolls is the number of POLL requests answered over the ring.
func (s *Server) RingPolls() uint64 {
	if s.ring == nil {
		return 0
	}
	return s.ring.polls.Load()
}
