package iser

// CMHeaderLen is the length of the iSER connection-management header that
// the initiator puts in the private data of its connection request (for
// iWARP: the MPA Request) and the target in its reply.
const CMHeaderLen = 4

// Flag bits of the CM header. The initiator sets them to say what it does
// not support; Linux isert answers with the same bits meaning "not used".
const (
	FlagZBVANotSupported    uint8 = 0x80 // zero-based virtual addressing not supported
	FlagSendInvNotSupported uint8 = 0x40 // Send with Invalidate not supported
)

// CMHeader is the iSER CM REQ/REP private data: a flags octet and three
// reserved octets. The layout is the "iSER CM REQ Message" of the IBTA's
// InfiniBand Annex A12 (iSER over InfiniBand), which the Linux initiator
// (struct iser_cm_hdr) and target (struct isert_cm_hdr) also send over
// iWARP; RFC 7145 itself leaves the transport's connection setup to the
// RCaP. A CMHeader is at least CMHeaderLen octets long when it comes from
// ParseCMHeader.
type CMHeader []byte

// ParseCMHeader returns the CM header at the start of the private data pd;
// octets after the first CMHeaderLen are ignored (MPA may carry more), and
// so are reserved bits. The only error is ErrShort.
func ParseCMHeader(pd []byte) (CMHeader, error) {
	if len(pd) < CMHeaderLen {
		return nil, ErrShort
	}
	return CMHeader(pd[:CMHeaderLen]), nil
}

// ZBVANotSupported reports the 0x80 flag: the sender does not support
// zero-based virtual addressing, so Base Offsets are virtual addresses.
func (h CMHeader) ZBVANotSupported() bool { return h[0]&FlagZBVANotSupported != 0 }

// SendInvNotSupported reports the 0x40 flag: the sender does not support
// Send with Invalidate.
func (h CMHeader) SendInvNotSupported() bool { return h[0]&FlagSendInvNotSupported != 0 }

// Fields returns the decoded header.
func (h CMHeader) Fields() CMFields {
	return CMFields{ZBVANotSupported: h.ZBVANotSupported(), SendInvNotSupported: h.SendInvNotSupported()}
}

// CMFields are the contents of a CM header.
type CMFields struct {
	ZBVANotSupported    bool
	SendInvNotSupported bool
}

// Encode writes the header into b[:CMHeaderLen], reserved octets zero, and
// returns CMHeaderLen, or ErrShortBuffer.
func (f CMFields) Encode(b []byte) (int, error) {
	if len(b) < CMHeaderLen {
		return 0, ErrShortBuffer
	}
	var flags uint8
	if f.ZBVANotSupported {
		flags |= FlagZBVANotSupported
	}
	if f.SendInvNotSupported {
		flags |= FlagSendInvNotSupported
	}
	b[0], b[1], b[2], b[3] = flags, 0, 0, 0
	return CMHeaderLen, nil
}
