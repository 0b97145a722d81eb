package ddp

import "encoding/binary"

// Version is the DDP version of this specification, carried in DV (4.1):
// "This field MUST be set to one".
const Version = 1

// Header lengths in octets (4.2, 4.3).
const (
	// TaggedHeaderLen is the length of the Tagged Buffer Model header:
	// control, RsvdULP (8 bits), STag (32), TO (64).
	TaggedHeaderLen = 14
	// UntaggedHeaderLen is the length of the Untagged Buffer Model header:
	// control, RsvdULP (40 bits), QN, MSN, MO (32 bits each).
	UntaggedHeaderLen = 18
)

// Control is the DDP Control Field, the first octet of every DDP header
// (4.1): T, L, four reserved bits and DV.
type Control uint8

// Bits of the DDP Control Field (4.1).
const (
	// FlagTagged is T: the payload is Placed into a Tagged Buffer.
	FlagTagged Control = 0x80
	// FlagLast is L: the segment is the Last of its DDP Message.
	FlagLast Control = 0x40
	// maskRsvd covers the four reserved bits, zero on transmit and not
	// checked on receive.
	maskRsvd Control = 0x3c
	// maskDV covers the two-bit DDP version.
	maskDV Control = 0x03
)

// MakeControl returns the Control Field for a segment sent by this
// implementation: T and L as given, reserved bits zero, DV = Version (4.1).
func MakeControl(tagged, last bool) Control {
	c := Control(Version)
	if tagged {
		c |= FlagTagged
	}
	if last {
		c |= FlagLast
	}
	return c
}

// Tagged reports the T flag: true for the Tagged Buffer Model (4.2), false
// for the Untagged Buffer Model (4.3).
func (c Control) Tagged() bool { return c&FlagTagged != 0 }

// Last reports the L flag: the segment is the last of its DDP Message (4.1).
func (c Control) Last() bool { return c&FlagLast != 0 }

// DV returns the DDP version field (4.1).
func (c Control) DV() uint8 { return uint8(c & maskDV) }

// HeaderLen returns the length of the header this Control Field starts:
// TaggedHeaderLen when T is set, UntaggedHeaderLen otherwise.
func (c Control) HeaderLen() int {
	if c.Tagged() {
		return TaggedHeaderLen
	}
	return UntaggedHeaderLen
}

// Field offsets within a DDP header (4.2, 4.3). The untagged header's
// RsvdULP[8:39] sits where the tagged header's STag does.
const (
	offControl  = 0
	offRsvdULP  = 1
	offSTag     = 2
	offTO       = 6
	offRsvdULP2 = 2
	offQN       = 6
	offMSN      = 10
	offMO       = 14
)

// Header is a DDP header, tagged (4.2) or untagged (4.3) as its T bit says.
// It is a view over the first octets of a DDP Segment; Parse returns one
// whose length has been checked. Accessors for fields of the other buffer
// model read the octets at that position and have no meaning; like any
// slice access they panic on a Header shorter than the field.
type Header []byte

// Control returns the DDP Control Field (4.1).
func (h Header) Control() Control { return Control(h[offControl]) }

// Tagged reports the T flag (4.1).
func (h Header) Tagged() bool { return h.Control().Tagged() }

// Last reports the L flag (4.1).
func (h Header) Last() bool { return h.Control().Last() }

// DV returns the DDP version (4.1).
func (h Header) DV() uint8 { return h.Control().DV() }

// Len returns the header length implied by the T bit: 14 or 18 octets.
func (h Header) Len() int { return h.Control().HeaderLen() }

// RsvdULP returns the first eight bits of RsvdULP, present in both header
// formats (4.2, 4.3); RDMAP carries its control field here.
func (h Header) RsvdULP() uint8 { return h[offRsvdULP] }

// RsvdULP32 returns RsvdULP[8:39] of an untagged header (4.3); RDMAP carries
// the Invalidate STag here.
func (h Header) RsvdULP32() uint32 { return binary.BigEndian.Uint32(h[offRsvdULP2:]) }

// STag returns the Steering Tag of a tagged header (4.2).
func (h Header) STag() uint32 { return binary.BigEndian.Uint32(h[offSTag:]) }

// TO returns the Tagged Offset of a tagged header (4.2).
func (h Header) TO() uint64 { return binary.BigEndian.Uint64(h[offTO:]) }

// QN returns the Queue Number of an untagged header (4.3).
func (h Header) QN() uint32 { return binary.BigEndian.Uint32(h[offQN:]) }

// MSN returns the Message Sequence Number of an untagged header (4.3).
func (h Header) MSN() uint32 { return binary.BigEndian.Uint32(h[offMSN:]) }

// MO returns the Message Offset of an untagged header (4.3).
func (h Header) MO() uint32 { return binary.BigEndian.Uint32(h[offMO:]) }

// SetLast sets or clears L, so one encoded header can be reused for every
// segment of a message (5.2).
func (h Header) SetLast(last bool) {
	if last {
		h[offControl] |= byte(FlagLast)
	} else {
		h[offControl] &^= byte(FlagLast)
	}
}

// SetTO sets the Tagged Offset of a tagged header; per 5.2 each segment
// carries the message's initial TO plus the segment's offset.
func (h Header) SetTO(to uint64) { binary.BigEndian.PutUint64(h[offTO:], to) }

// SetMO sets the Message Offset of an untagged header; per 5.2 each segment
// carries its octet offset within the message.
func (h Header) SetMO(mo uint32) { binary.BigEndian.PutUint32(h[offMO:], mo) }

// TaggedFields are the values of a Tagged Buffer Model header (4.2).
type TaggedFields struct {
	Last    bool   // L: last segment of the DDP Message
	RsvdULP uint8  // opaque to DDP; the RDMAP control field
	STag    uint32 // Data Sink's Tagged Buffer
	TO      uint64 // offset of this segment's payload in that buffer
}

// Encode writes the 14-octet tagged header into b with T = 1, DV = Version
// and the reserved bits zero (4.1, 4.2). It returns the octets written, or
// ErrShortBuffer (writing nothing) when b is shorter than the header.
func (f TaggedFields) Encode(b []byte) (int, error) {
	if len(b) < TaggedHeaderLen {
		return 0, ErrShortBuffer
	}
	b = b[:TaggedHeaderLen]
	b[offControl] = byte(MakeControl(true, f.Last))
	b[offRsvdULP] = f.RsvdULP
	binary.BigEndian.PutUint32(b[offSTag:], f.STag)
	binary.BigEndian.PutUint64(b[offTO:], f.TO)
	return TaggedHeaderLen, nil
}

// UntaggedFields are the values of an Untagged Buffer Model header (4.3).
type UntaggedFields struct {
	Last      bool   // L: last segment of the DDP Message
	RsvdULP   uint8  // RsvdULP[0:7]; the RDMAP control field
	RsvdULP32 uint32 // RsvdULP[8:39]; RDMAP's Invalidate STag, else zero
	QN        uint32 // Data Sink's Untagged Buffer queue
	MSN       uint32 // message number on that queue, starting at one
	MO        uint32 // offset of this segment's payload in the message
}

// Encode writes the 18-octet untagged header into b with T = 0, DV =
// Version and the reserved bits zero (4.1, 4.3). It returns the octets
// written, or ErrShortBuffer (writing nothing) when b is too short.
func (f UntaggedFields) Encode(b []byte) (int, error) {
	if len(b) < UntaggedHeaderLen {
		return 0, ErrShortBuffer
	}
	b = b[:UntaggedHeaderLen]
	b[offControl] = byte(MakeControl(false, f.Last))
	b[offRsvdULP] = f.RsvdULP
	binary.BigEndian.PutUint32(b[offRsvdULP2:], f.RsvdULP32)
	binary.BigEndian.PutUint32(b[offQN:], f.QN)
	binary.BigEndian.PutUint32(b[offMSN:], f.MSN)
	binary.BigEndian.PutUint32(b[offMO:], f.MO)
	return UntaggedHeaderLen, nil
}

// Parse splits a received DDP Segment (4.4) into its header and ULP Payload,
// both aliasing seg. It checks, in order, that seg holds a Control Field,
// that DV is Version (returning ErrTaggedVersion or ErrUntaggedVersion as T
// says, 7.2), and that seg holds the whole header its T bit calls for
// (ErrShortHeader). Reserved bits are not checked (4.1). On error both
// results are nil.
func Parse(seg []byte) (Header, []byte, error) {
	if len(seg) == 0 {
		return nil, nil, ErrShortHeader
	}
	c := Control(seg[0])
	if err := CheckVersion(c); err != nil {
		return nil, nil, err
	}
	n := c.HeaderLen()
	if len(seg) < n {
		return nil, nil, ErrShortHeader
	}
	return Header(seg[:n:n]), seg[n:], nil
}

// CheckVersion returns nil when DV is Version, else the Invalid DDP version
// error of the segment's buffer model: tagged 0x1/0x04 or untagged 0x2/0x06
// (7.2).
func CheckVersion(c Control) error {
	if c.DV() == Version {
		return nil
	}
	if c.Tagged() {
		return Error{TypeTagged, CodeTaggedVersion}
	}
	return Error{TypeUntagged, CodeUntaggedVersion}
}
