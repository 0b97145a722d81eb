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

	allAccess = LocalWrite | RemoteRead | RemoteWrite | RemoteInvalidate
)

var accessNames = [...]string{"LocalWrite", "RemoteRead", "RemoteWrite", "RemoteInvalidate"}

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
