package initiator

// TCPWrites is how many writev calls of posted PDUs the iSCSI/TCP
// session's current connection made; 0 for another transport.
func TCPWrites(s *Session) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tr.(*tcpTransport); ok {
		return t.writes.Load()
	}
	return 0
}
