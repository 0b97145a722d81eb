package target

// TCPWrites is how many writev calls iSCSI/TCP connections made so far.
func TCPWrites() uint64 { return tcpWrites.Load() }
