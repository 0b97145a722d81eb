package iser

import (
	"encoding/binary"
	"strconv"
)

// Opcode is the 4-bit iSER opcode in the high nibble of the first octet of
// every iSER message (RFC 7145 section 9.1).
type Opcode uint8

// The iSER opcodes (RFC 7145 sections 9.1 to 9.3); all others are reserved.
const (
	OpISCSIControl Opcode = 0x1 // iSCSI control-type PDU follows the header
	OpHello        Opcode = 0x2 // iSER Hello Message
	OpHelloReply   Opcode = 0x3 // iSER HelloReply Message
)

// Valid reports whether op is one of the defined opcodes.
func (op Opcode) Valid() bool { return op >= OpISCSIControl && op <= OpHelloReply }

func (op Opcode) String() string {
	switch op {
	case OpISCSIControl:
		return "iSCSI control-type PDU"
	case OpHello:
		return "iSER Hello"
	case OpHelloReply:
		return "iSER HelloReply"
	}
	return "iSER opcode " + strconv.Itoa(int(op))
}

// MessageOpcode returns the opcode of the iSER message b, without checking
// anything beyond its first octet. It fails with ErrShort on an empty b and
// ErrUnknownOpcode on a reserved opcode.
func MessageOpcode(b []byte) (Opcode, error) {
	if len(b) == 0 {
		return 0, ErrShort
	}
	op := Opcode(b[0] >> 4)
	if !op.Valid() {
		return op, ErrUnknownOpcode
	}
	return op, nil
}

// HeaderLen is the length of the iSER header for an iSCSI control-type PDU
// (RFC 7145 section 9.1): flags, 3 reserved octets, Write STag, Write Base
// Offset, Read STag, Read Base Offset.
const HeaderLen = 28

// Flag bits of octet 0 of the iSER header (RFC 7145 section 9.1).
const (
	FlagWSV uint8 = 0x08 // Write STag Valid
	FlagRSV uint8 = 0x04 // Read STag Valid
)

// Header is the iSER header of an iSCSI control-type PDU (RFC 7145
// section 9.1):
//
//	octet  0     : opcode (high nibble) | W | R | reserved
//	octets 1-3   : reserved
//	octets 4-7   : Write STag
//	octets 8-15  : Write Base Offset (the Linux initiator sends a VA)
//	octets 16-19 : Read STag
//	octets 20-27 : Read Base Offset
//
// All fields are in network byte order. A Header is at least HeaderLen
// octets long when it comes from ParseHeader.
type Header []byte

// ParseHeader checks that msg starts with an iSER header for an iSCSI
// control-type PDU and returns the header and the iSCSI PDU that follows
// it. Reserved bits are ignored. Errors: ErrShort, ErrUnknownOpcode, and
// ErrWrongOpcode for a Hello or HelloReply.
func ParseHeader(msg []byte) (Header, []byte, error) {
	op, err := MessageOpcode(msg)
	if err != nil {
		return nil, nil, err
	}
	if op != OpISCSIControl {
		return nil, nil, ErrWrongOpcode
	}
	if len(msg) < HeaderLen {
		return nil, nil, ErrShort
	}
	return Header(msg[:HeaderLen]), msg[HeaderLen:], nil
}

// Opcode is the opcode nibble of octet 0.
func (h Header) Opcode() Opcode { return Opcode(h[0] >> 4) }

// WriteValid is the W (Write STag Valid) flag: the Write STag and Write
// Base Offset describe the initiator's buffer for a SCSI Write (the target
// RDMA Reads from it).
func (h Header) WriteValid() bool { return h[0]&FlagWSV != 0 }

// ReadValid is the R (Read STag Valid) flag: the Read STag and Read Base
// Offset describe the initiator's buffer for a SCSI Read (the target RDMA
// Writes into it).
func (h Header) ReadValid() bool { return h[0]&FlagRSV != 0 }

// WriteSTag is the Write STag (octets 4-7).
func (h Header) WriteSTag() uint32 { return binary.BigEndian.Uint32(h[4:]) }

// WriteBaseOffset is the Write Base Offset (octets 8-15).
func (h Header) WriteBaseOffset() uint64 { return binary.BigEndian.Uint64(h[8:]) }

// ReadSTag is the Read STag (octets 16-19).
func (h Header) ReadSTag() uint32 { return binary.BigEndian.Uint32(h[16:]) }

// ReadBaseOffset is the Read Base Offset (octets 20-27).
func (h Header) ReadBaseOffset() uint64 { return binary.BigEndian.Uint64(h[20:]) }

// Fields returns the decoded header.
func (h Header) Fields() HeaderFields {
	return HeaderFields{
		WriteValid:      h.WriteValid(),
		WriteSTag:       h.WriteSTag(),
		WriteBaseOffset: h.WriteBaseOffset(),
		ReadValid:       h.ReadValid(),
		ReadSTag:        h.ReadSTag(),
		ReadBaseOffset:  h.ReadBaseOffset(),
	}
}

// HeaderFields are the contents of an iSER header for an iSCSI
// control-type PDU. A STag and Base Offset whose Valid flag is false are
// encoded as given (senders normally leave them zero).
type HeaderFields struct {
	WriteValid      bool
	WriteSTag       uint32
	WriteBaseOffset uint64
	ReadValid       bool
	ReadSTag        uint32
	ReadBaseOffset  uint64
}

// Encode writes the header into b[:HeaderLen], reserved fields zero, and
// returns HeaderLen, or ErrShortBuffer if b is too short.
func (f HeaderFields) Encode(b []byte) (int, error) {
	if len(b) < HeaderLen {
		return 0, ErrShortBuffer
	}
	b = b[:HeaderLen]
	flags := uint8(OpISCSIControl) << 4
	if f.WriteValid {
		flags |= FlagWSV
	}
	if f.ReadValid {
		flags |= FlagRSV
	}
	b[0], b[1], b[2], b[3] = flags, 0, 0, 0
	binary.BigEndian.PutUint32(b[4:], f.WriteSTag)
	binary.BigEndian.PutUint64(b[8:], f.WriteBaseOffset)
	binary.BigEndian.PutUint32(b[16:], f.ReadSTag)
	binary.BigEndian.PutUint64(b[20:], f.ReadBaseOffset)
	return HeaderLen, nil
}
