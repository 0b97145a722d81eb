package iscsi

import "encoding/binary"

// BHSLen is the length of the Basic Header Segment (section 11.2.1).
const BHSLen = 48

// Flag bits of octets 0 and 1 common to all PDUs (section 11.2.1.1).
const (
	FlagImmediate uint8 = 0x40 // octet 0: I, immediate delivery
	FlagFinal     uint8 = 0x80 // octet 1: F, final PDU of a sequence
)

// MaxDataSegmentLength is the largest DataSegmentLength (24 bits).
const MaxDataSegmentLength = 1<<24 - 1

// BHS is the 48-octet Basic Header Segment of an iSCSI PDU (section
// 11.2.1):
//
//	octet  0     : . | I | Opcode (6 bits)
//	octet  1     : F | opcode-specific
//	octets 2-3   : opcode-specific
//	octet  4     : TotalAHSLength (4-octet words)
//	octets 5-7   : DataSegmentLength (octets, without padding)
//	octets 8-15  : LUN or opcode-specific
//	octets 16-19 : Initiator Task Tag
//	octets 20-47 : opcode-specific
//
// A BHS from Parse or Init is exactly BHSLen octets long. The typed views
// (SCSICommand, LoginReq, ...) add the opcode-specific fields; their
// constructors check or set the opcode.
type BHS []byte

// Parse checks that pdu starts with a BHS with a defined opcode and returns
// it. The reserved bit 0x80 of octet 0 is ignored. Errors: ErrShort,
// ErrUnknownOpcode.
func Parse(pdu []byte) (BHS, error) {
	if len(pdu) < BHSLen {
		return nil, ErrShort
	}
	if !Opcode(pdu[0] & 0x3f).Valid() {
		return nil, ErrUnknownOpcode
	}
	return BHS(pdu[:BHSLen]), nil
}

// Init zeroes buf[:BHSLen], sets the opcode and returns the BHS, ready for
// the setters. Errors: ErrShortBuffer, ErrUnknownOpcode.
func Init(buf []byte, op Opcode) (BHS, error) {
	if len(buf) < BHSLen {
		return nil, ErrShortBuffer
	}
	if !op.Valid() {
		return nil, ErrUnknownOpcode
	}
	b := BHS(buf[:BHSLen])
	clear(b)
	b[0] = uint8(op)
	return b, nil
}

// Opcode is the 6-bit opcode of octet 0.
func (b BHS) Opcode() Opcode { return Opcode(b[0] & 0x3f) }

// Immediate is the I bit: immediate delivery (initiator PDUs only).
func (b BHS) Immediate() bool { return b[0]&FlagImmediate != 0 }

// SetImmediate sets or clears the I bit.
func (b BHS) SetImmediate(v bool) { setBit(b, 0, FlagImmediate, v) }

// Final is the F bit of octet 1.
func (b BHS) Final() bool { return b[1]&FlagFinal != 0 }

// SetFinal sets or clears the F bit.
func (b BHS) SetFinal(v bool) { setBit(b, 1, FlagFinal, v) }

// Flags is octet 1 whole: F and the opcode-specific flags.
func (b BHS) Flags() uint8 { return b[1] }

// TotalAHSLength is the length of the Additional Header Segments in
// 4-octet words (octet 4).
func (b BHS) TotalAHSLength() uint8 { return b[4] }

// SetTotalAHSLength sets octet 4.
func (b BHS) SetTotalAHSLength(words uint8) { b[4] = words }

// DataSegmentLength is the length of the data segment in octets, without
// its padding to a multiple of 4 (octets 5-7).
func (b BHS) DataSegmentLength() uint32 {
	return uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
}

// SetDataSegmentLength sets octets 5-7; ErrRange above
// MaxDataSegmentLength.
func (b BHS) SetDataSegmentLength(n uint32) error {
	if n > MaxDataSegmentLength {
		return ErrRange
	}
	b[5], b[6], b[7] = byte(n>>16), byte(n>>8), byte(n)
	return nil
}

// PaddedDataLength is DataSegmentLength rounded up to a multiple of 4.
func (b BHS) PaddedDataLength() int { return (int(b.DataSegmentLength()) + 3) &^ 3 }

// PDULen is the length of the whole PDU: BHS, AHS and padded data segment.
// Under iSER the header and data digests are not used (RFC 7145: the RCaP
// protects the data), so no digests are counted.
func (b BHS) PDULen() int { return BHSLen + 4*int(b.TotalAHSLength()) + b.PaddedDataLength() }

// LUN is octets 8-15, for the PDUs that carry one.
func (b BHS) LUN() LUN { return LUN(binary.BigEndian.Uint64(b[8:])) }

// SetLUN sets octets 8-15.
func (b BHS) SetLUN(l LUN) { l.Put(b[8:]) }

// ITT is the Initiator Task Tag (octets 16-19); 0xffffffff is reserved
// (section 11.2.1.8).
func (b BHS) ITT() uint32 { return binary.BigEndian.Uint32(b[16:]) }

// SetITT sets octets 16-19.
func (b BHS) SetITT(v uint32) { binary.BigEndian.PutUint32(b[16:], v) }

// ReservedITT is the Initiator Task Tag value that no task uses (section
// 11.2.1.8); unsolicited NOP-Ins and Rejects carry it.
const ReservedITT = 0xffffffff

// Word is the big-endian 32-bit word at octet off (a multiple of 4 below
// 48), for opcode-specific fields without a typed accessor.
func (b BHS) Word(off int) uint32 { return binary.BigEndian.Uint32(b[off:]) }

// SetWord sets the 32-bit word at octet off.
func (b BHS) SetWord(off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

func setBit(b []byte, i int, mask uint8, v bool) {
	if v {
		b[i] |= mask
	} else {
		b[i] &^= mask
	}
}

func (b BHS) view(op Opcode) error {
	if b.Opcode() != op {
		return ErrWrongOpcode
	}
	return nil
}

func initView(buf []byte, op Opcode, flags1 uint8) (BHS, error) {
	b, err := Init(buf, op)
	if err != nil {
		return nil, err
	}
	b[1] = flags1
	return b, nil
}
