package iser

import "encoding/binary"

// HelloLen is the length of the iSER Hello and HelloReply messages (RFC
// 7145 sections 9.2 and 9.3): one 32-bit word of fields and two reserved
// words.
const HelloLen = 12

// Version is the iSER protocol version of RFC 7145, carried in the 4-bit
// MaxVer, MinVer and CurVer fields. It is 10 (0xA) as the Wireshark iSER
// dissector (written at Mellanox alongside RFC 7145) requires of Hello and
// HelloReply; RFC 5046-era code (illumos) sends 1. Not checked against the
// RFC text, which was not at hand: the codecs here accept any version.
const Version = 0xA

// FlagReject is the Reject flag, the least significant bit of octet 0 of a
// HelloReply (RFC 7145 section 9.3).
const FlagReject uint8 = 0x01

// Hello is the iSER Hello Message, sent by the initiator as its first
// message when the iSER-assisted connection starts on a transport that
// needs it (RFC 7145 section 9.2):
//
//	octet  0     : opcode 0x2 (high nibble) | reserved
//	octet  1     : MaxVer (high nibble) | MinVer (low nibble)
//	octets 2-3   : iSER-IRD
//	octets 4-11  : reserved
type Hello []byte

// ParseHello checks that b is an iSER Hello Message (at least HelloLen
// octets; extra octets are ignored) and returns its first HelloLen octets.
// Errors: ErrShort, ErrUnknownOpcode, ErrWrongOpcode.
func ParseHello(b []byte) (Hello, error) {
	op, err := MessageOpcode(b)
	if err != nil {
		return nil, err
	}
	if op != OpHello {
		return nil, ErrWrongOpcode
	}
	if len(b) < HelloLen {
		return nil, ErrShort
	}
	return Hello(b[:HelloLen]), nil
}

// MaxVer is the highest iSER version the initiator supports.
func (h Hello) MaxVer() uint8 { return h[1] >> 4 }

// MinVer is the lowest iSER version the initiator supports.
func (h Hello) MinVer() uint8 { return h[1] & 0x0f }

// IRD is the iSER-IRD field: the initiator's inbound RDMA Read queue depth.
func (h Hello) IRD() uint16 { return binary.BigEndian.Uint16(h[2:]) }

// Fields returns the decoded message.
func (h Hello) Fields() HelloFields {
	return HelloFields{MaxVer: h.MaxVer(), MinVer: h.MinVer(), IRD: h.IRD()}
}

// HelloFields are the contents of an iSER Hello Message.
type HelloFields struct {
	MaxVer, MinVer uint8 // 4 bits each
	IRD            uint16
}

// Encode writes the message into b[:HelloLen] and returns HelloLen.
// Errors: ErrShortBuffer, ErrVersion for a version above 15.
func (f HelloFields) Encode(b []byte) (int, error) {
	if f.MaxVer > 0xf || f.MinVer > 0xf {
		return 0, ErrVersion
	}
	if len(b) < HelloLen {
		return 0, ErrShortBuffer
	}
	b = b[:HelloLen]
	clear(b)
	b[0] = uint8(OpHello) << 4
	b[1] = f.MaxVer<<4 | f.MinVer
	binary.BigEndian.PutUint16(b[2:], f.IRD)
	return HelloLen, nil
}

// HelloReply is the iSER HelloReply Message, the target's answer to a
// Hello (RFC 7145 section 9.3):
//
//	octet  0     : opcode 0x3 (high nibble) | reserved (3 bits) | Reject flag
//	octet  1     : MaxVer (high nibble) | CurVer (low nibble)
//	octets 2-3   : iSER-ORD
//	octets 4-11  : reserved
type HelloReply []byte

// ParseHelloReply checks that b is an iSER HelloReply Message (at least
// HelloLen octets; extra octets are ignored) and returns its first HelloLen
// octets. Errors: ErrShort, ErrUnknownOpcode, ErrWrongOpcode.
func ParseHelloReply(b []byte) (HelloReply, error) {
	op, err := MessageOpcode(b)
	if err != nil {
		return nil, err
	}
	if op != OpHelloReply {
		return nil, ErrWrongOpcode
	}
	if len(b) < HelloLen {
		return nil, ErrShort
	}
	return HelloReply(b[:HelloLen]), nil
}

// Reject is the Reject flag: the target refuses the iSER-assisted
// connection (for instance because no version in MinVer..MaxVer is
// supported).
func (h HelloReply) Reject() bool { return h[0]&FlagReject != 0 }

// MaxVer is the highest iSER version the target supports.
func (h HelloReply) MaxVer() uint8 { return h[1] >> 4 }

// CurVer is the iSER version the target chose for this connection.
func (h HelloReply) CurVer() uint8 { return h[1] & 0x0f }

// ORD is the iSER-ORD field: the target's outbound RDMA Read queue depth.
func (h HelloReply) ORD() uint16 { return binary.BigEndian.Uint16(h[2:]) }

// Fields returns the decoded message.
func (h HelloReply) Fields() HelloReplyFields {
	return HelloReplyFields{Reject: h.Reject(), MaxVer: h.MaxVer(), CurVer: h.CurVer(), ORD: h.ORD()}
}

// HelloReplyFields are the contents of an iSER HelloReply Message.
type HelloReplyFields struct {
	Reject         bool
	MaxVer, CurVer uint8 // 4 bits each
	ORD            uint16
}

// Encode writes the message into b[:HelloLen] and returns HelloLen.
// Errors: ErrShortBuffer, ErrVersion for a version above 15.
func (f HelloReplyFields) Encode(b []byte) (int, error) {
	if f.MaxVer > 0xf || f.CurVer > 0xf {
		return 0, ErrVersion
	}
	if len(b) < HelloLen {
		return 0, ErrShortBuffer
	}
	b = b[:HelloLen]
	clear(b)
	b[0] = uint8(OpHelloReply) << 4
	if f.Reject {
		b[0] |= FlagReject
	}
	b[1] = f.MaxVer<<4 | f.CurVer
	binary.BigEndian.PutUint16(b[2:], f.ORD)
	return HelloLen, nil
}
