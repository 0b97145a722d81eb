// Typed views of the data-movement PDUs of traditional iSCSI (RFC 7143
// sections 11.7 and 11.8), which iSER replaces by RDMA (RFC 7145 section
// 7.3) and iSCSI over TCP uses.

package iscsi

import "encoding/binary"

// SCSIDataOut is a view of a BHS whose opcode is OpSCSIDataOut (section
// 11.7.1): write data sent by the initiator, solicited by an R2T (its TTT)
// or unsolicited (TTT 0xffffffff).
type SCSIDataOut struct{ BHS }

// AsSCSIDataOut returns b as a SCSIDataOut, or ErrWrongOpcode.
func AsSCSIDataOut(b BHS) (SCSIDataOut, error) {
	if err := b.view(OpSCSIDataOut); err != nil {
		return SCSIDataOut{}, err
	}
	return SCSIDataOut{b}, nil
}

// NewSCSIDataOut zeroes buf[:BHSLen] and returns it as a SCSIDataOut with
// its opcode; fill it with the setters. Errors: ErrShortBuffer.
func NewSCSIDataOut(buf []byte) (SCSIDataOut, error) {
	b, err := initView(buf, OpSCSIDataOut, 0)
	if err != nil {
		return SCSIDataOut{}, err
	}
	return SCSIDataOut{b}, nil
}

// TTT is the Target Transfer Tag of the R2T it answers (octets 20-23).
func (p SCSIDataOut) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p SCSIDataOut) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// ExpStatSN is octets 28-31.
func (p SCSIDataOut) ExpStatSN() uint32 { return binary.BigEndian.Uint32(p.BHS[28:]) }

// SetExpStatSN sets octets 28-31.
func (p SCSIDataOut) SetExpStatSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[28:], v) }

// DataSN numbers the Data-Out PDUs of one sequence from 0 (octets 36-39,
// section 11.7.5).
func (p SCSIDataOut) DataSN() uint32 { return binary.BigEndian.Uint32(p.BHS[36:]) }

// SetDataSN sets octets 36-39.
func (p SCSIDataOut) SetDataSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[36:], v) }

// BufferOffset is the offset of the data segment in the command's data
// (octets 40-43, section 11.7.6).
func (p SCSIDataOut) BufferOffset() uint32 { return binary.BigEndian.Uint32(p.BHS[40:]) }

// SetBufferOffset sets octets 40-43.
func (p SCSIDataOut) SetBufferOffset(v uint32) { binary.BigEndian.PutUint32(p.BHS[40:], v) }

// SCSIDataIn is a view of a BHS whose opcode is OpSCSIDataIn (section
// 11.7.2): read data sent by the target, possibly with the command's
// status (S bit).
type SCSIDataIn struct{ TargetSNs }

// AsSCSIDataIn returns b as a SCSIDataIn, or ErrWrongOpcode.
func AsSCSIDataIn(b BHS) (SCSIDataIn, error) {
	if err := b.view(OpSCSIDataIn); err != nil {
		return SCSIDataIn{}, err
	}
	return SCSIDataIn{TargetSNs{b}}, nil
}

// NewSCSIDataIn zeroes buf[:BHSLen] and returns it as a SCSIDataIn with
// its opcode; fill it with the setters. Errors: ErrShortBuffer.
func NewSCSIDataIn(buf []byte) (SCSIDataIn, error) {
	b, err := initView(buf, OpSCSIDataIn, 0)
	if err != nil {
		return SCSIDataIn{}, err
	}
	return SCSIDataIn{TargetSNs{b}}, nil
}

// Acknowledge is the A bit: the target asks for a DataACK SNACK (octet 1,
// mask 0x40; only at ErrorRecoveryLevel 1 and above).
func (p SCSIDataIn) Acknowledge() bool { return p.BHS[1]&0x40 != 0 }

// Overflow is the O bit (octet 1, mask 0x04; with S).
func (p SCSIDataIn) Overflow() bool { return p.BHS[1]&0x04 != 0 }

// SetOverflow sets octet 1, mask 0x04.
func (p SCSIDataIn) SetOverflow(v bool) { setBit(p.BHS, 1, 0x04, v) }

// Underflow is the U bit (octet 1, mask 0x02; with S).
func (p SCSIDataIn) Underflow() bool { return p.BHS[1]&0x02 != 0 }

// SetUnderflow sets octet 1, mask 0x02.
func (p SCSIDataIn) SetUnderflow(v bool) { setBit(p.BHS, 1, 0x02, v) }

// HasStatus is the S bit: the PDU carries the command's status and ends it
// (octet 1, mask 0x01; only with F).
func (p SCSIDataIn) HasStatus() bool { return p.BHS[1]&0x01 != 0 }

// SetHasStatus sets octet 1, mask 0x01.
func (p SCSIDataIn) SetHasStatus(v bool) { setBit(p.BHS, 1, 0x01, v) }

// Status is the SAM status when HasStatus (octet 3).
func (p SCSIDataIn) Status() uint8 { return p.BHS[3] }

// SetStatus sets octet 3.
func (p SCSIDataIn) SetStatus(v uint8) { p.BHS[3] = v }

// TTT is the Target Transfer Tag: 0xffffffff unless A is set (octets
// 20-23).
func (p SCSIDataIn) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p SCSIDataIn) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// DataSN numbers the command's Data-In PDUs from 0 (octets 36-39).
func (p SCSIDataIn) DataSN() uint32 { return binary.BigEndian.Uint32(p.BHS[36:]) }

// SetDataSN sets octets 36-39.
func (p SCSIDataIn) SetDataSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[36:], v) }

// BufferOffset is the offset of the data segment in the command's data
// (octets 40-43).
func (p SCSIDataIn) BufferOffset() uint32 { return binary.BigEndian.Uint32(p.BHS[40:]) }

// SetBufferOffset sets octets 40-43.
func (p SCSIDataIn) SetBufferOffset(v uint32) { binary.BigEndian.PutUint32(p.BHS[40:], v) }

// ResidualCount is octets 44-47 (with S).
func (p SCSIDataIn) ResidualCount() uint32 { return binary.BigEndian.Uint32(p.BHS[44:]) }

// SetResidualCount sets octets 44-47.
func (p SCSIDataIn) SetResidualCount(v uint32) { binary.BigEndian.PutUint32(p.BHS[44:], v) }

// R2T is a view of a BHS whose opcode is OpR2T (section 11.8): the target
// asks for Desired Data Transfer Length octets of write data from Buffer
// Offset.
type R2T struct{ TargetSNs }

// AsR2T returns b as an R2T, or ErrWrongOpcode.
func AsR2T(b BHS) (R2T, error) {
	if err := b.view(OpR2T); err != nil {
		return R2T{}, err
	}
	return R2T{TargetSNs{b}}, nil
}

// NewR2T zeroes buf[:BHSLen] and returns it as an R2T with its opcode and
// the F bit (always 1, section 11.8); fill it with the setters. Errors:
// ErrShortBuffer.
func NewR2T(buf []byte) (R2T, error) {
	b, err := initView(buf, OpR2T, FlagFinal)
	if err != nil {
		return R2T{}, err
	}
	return R2T{TargetSNs{b}}, nil
}

// TTT is the Target Transfer Tag the Data-Out PDUs answering it carry
// (octets 20-23).
func (p R2T) TTT() uint32 { return binary.BigEndian.Uint32(p.BHS[20:]) }

// SetTTT sets octets 20-23.
func (p R2T) SetTTT(v uint32) { binary.BigEndian.PutUint32(p.BHS[20:], v) }

// R2TSN numbers the command's R2Ts from 0 (octets 36-39).
func (p R2T) R2TSN() uint32 { return binary.BigEndian.Uint32(p.BHS[36:]) }

// SetR2TSN sets octets 36-39.
func (p R2T) SetR2TSN(v uint32) { binary.BigEndian.PutUint32(p.BHS[36:], v) }

// BufferOffset is where the requested data starts in the command's data
// (octets 40-43).
func (p R2T) BufferOffset() uint32 { return binary.BigEndian.Uint32(p.BHS[40:]) }

// SetBufferOffset sets octets 40-43.
func (p R2T) SetBufferOffset(v uint32) { binary.BigEndian.PutUint32(p.BHS[40:], v) }

// DesiredDataTransferLength is how many octets are requested (octets
// 44-47; at most MaxBurstLength, section 11.8.4).
func (p R2T) DesiredDataTransferLength() uint32 { return binary.BigEndian.Uint32(p.BHS[44:]) }

// SetDesiredDataTransferLength sets octets 44-47.
func (p R2T) SetDesiredDataTransferLength(v uint32) { binary.BigEndian.PutUint32(p.BHS[44:], v) }
