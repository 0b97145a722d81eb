package sctp

// Sizes behind the maximum DDP Segment size (section 9).
const (
	// MinChunk is the smallest maximum chunk a DDP/SCTP LLP may offer: "A
	// minimum of 516 bytes is required to allow a DDP Stream Session
	// Control Message with 512 bytes of Private Data."
	MinChunk = ControlHeaderLen + MaxPrivateData
	// CommonHeaderLen and DataChunkHeaderLen are SCTP's (RFC 4960 3.1,
	// 3.3.1); IPv4HeaderLen, IPv6HeaderLen and UDPHeaderLen the packet's
	// below it.
	CommonHeaderLen    = 12
	DataChunkHeaderLen = 16
	IPv4HeaderLen      = 20
	IPv6HeaderLen      = 40
	UDPHeaderLen       = 8
	// BundleRoom is left in each packet for a control chunk bundled with a
	// full DATA chunk: a SACK without gap blocks (9: "SHOULD set the maximum
	// DDP Segment size below the theoretical maximum in order to allow
	// bundling of Control Chunks").
	BundleRoom = 16
)

// MaxChunk returns the largest Payload Data Chunk user data (DDP-SSN
// included) this end sends when SCTP carries at most maxUserData octets of
// user data in one DATA chunk of one packet: below that by BundleRoom, and
// never under MinChunk (9: "or 516 bytes, whichever is larger").
func MaxChunk(maxUserData int) int {
	return max(maxUserData-BundleRoom, MinChunk)
}

// UserDataForMTU returns the user data one DATA chunk carries in a packet
// of mtu octets whose headers below SCTP's common header take below octets,
// rounded down to SCTP's 4-octet padding.
func UserDataForMTU(mtu, below int) int {
	n := mtu - below - CommonHeaderLen - DataChunkHeaderLen
	return max(n-n%4, 0)
}

// MULPDU returns the largest DDP Segment a chunk of maxChunk octets
// carries: what is left after the DDP-SSN. This is the MULPDU the
// adaptation layer reports to DDP (RFC 5041 5.1, section 9 here).
func MULPDU(maxChunk int) int { return maxChunk - SSNLen }
