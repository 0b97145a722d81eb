package mem

import "strings"

// Access is a set of access rights of a memory region. Local read access is
// always granted.
type Access uint8

// The access rights, as in RDMA verbs.
const (
	// LocalWrite: the local RNIC may write the region (receive buffers,
	// RDMA Read Response sinks).
	LocalWrite Access = 1 << iota
	// RemoteRead: the peer may read the region with RDMA Read.
	RemoteRead
	// RemoteWrite: the peer may write the region with RDMA Write.
	// Requires LocalWrite, as in verbs.
	RemoteWrite
	// RemoteInvalidate: the peer may invalidate the region's STag with
	// Send with Invalidate (as iSER targets do for initiators' STags).
	RemoteInvalidate
	// Verified is not a right but a promise the RNIC keeps for the
	// region: tagged data (RDMA Write, RDMA Read Response) are placed in
	// it only once their segment has been verified (the FPDU's CRC,
	// RFC 5044 section 8; SCTP's checksum), staged in the receiver until
	// then, so that the region never holds octets the peer did not send.
	// For memory a corrupted stream must not damage, such as a store's
	// blocks; it costs a copy of data still in cache.
	Verified

	allAccess = LocalWrite | RemoteRead | RemoteWrite | RemoteInvalidate | Verified
)

var accessNames = [...]string{"LocalWrite", "RemoteRead", "RemoteWrite", "RemoteInvalidate", "Verified"}

func (a Access) String() string {
	if a == 0 {
		return "LocalRead"
	}
	var b strings.Builder
	for i, name := range accessNames {
		if a&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(name)
		}
	}
	if a&^allAccess != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("invalid")
	}
	return b.String()
}

// valid reports whether a is a combination that may be registered.
func (a Access) valid() bool {
	return a&^allAccess == 0 && (a&RemoteWrite == 0 || a&LocalWrite != 0)
}

// writes reports whether a lets anyone store into the region.
func (a Access) writes() bool { return a&(LocalWrite|RemoteWrite) != 0 }
