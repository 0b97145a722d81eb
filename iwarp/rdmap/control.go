package rdmap

import (
	"strconv"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// Version is the RDMAP version of RFC 5040, carried in RV (4.1): "01b for
// an RNIC that complies with this RDMA protocol specification".
const Version = 1

// Opcode is the 4-bit RDMA OpCode of the RDMAP Control Field (4.1,
// Figure 4). 1000b to 1111b are reserved.
type Opcode uint8

// The RDMA OpCodes of Figure 4.
const (
	OpWrite            Opcode = 0x0 // RDMA Write
	OpReadRequest      Opcode = 0x1 // RDMA Read Request
	OpReadResponse     Opcode = 0x2 // RDMA Read Response
	OpSend             Opcode = 0x3 // Send
	OpSendInvalidate   Opcode = 0x4 // Send with Invalidate
	OpSendSE           Opcode = 0x5 // Send with Solicited Event
	OpSendSEInvalidate Opcode = 0x6 // Send with Solicited Event and Invalidate
	OpTerminate        Opcode = 0x7 // Terminate
)

// Layout of the RDMAP Control Field octet (Figure 3).
const (
	maxOpcode        = OpTerminate
	maskOpcode uint8 = 0x0f
	shiftRV          = 6
)

// The untagged DDP queues RDMAP uses (Figure 4; 5.2.1, 5.3, 5.4).
const (
	QNSend        uint32 = 0 // Send, Send with Invalidate, with SE, with SE and Invalidate
	QNReadRequest uint32 = 1 // RDMA Read Request
	QNTerminate   uint32 = 2 // Terminate
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "RDMA Write"
	case OpReadRequest:
		return "RDMA Read Request"
	case OpReadResponse:
		return "RDMA Read Response"
	case OpSend:
		return "Send"
	case OpSendInvalidate:
		return "Send with Invalidate"
	case OpSendSE:
		return "Send with Solicited Event"
	case OpSendSEInvalidate:
		return "Send with Solicited Event and Invalidate"
	case OpTerminate:
		return "Terminate"
	}
	return "reserved opcode 0x" + strconv.FormatUint(uint64(o), 16)
}

// Valid reports whether Figure 4 defines the opcode (0000b to 0111b).
func (o Opcode) Valid() bool { return o <= maxOpcode }

// Tagged reports whether the Message uses the Tagged Buffer Model: RDMA
// Write and RDMA Read Response (Figure 4, Tagged Flag 1).
func (o Opcode) Tagged() bool { return o == OpWrite || o == OpReadResponse }

// QN returns the untagged queue the Message targets (Figure 4), and false
// for tagged and reserved opcodes.
func (o Opcode) QN() (uint32, bool) {
	switch o {
	case OpSend, OpSendInvalidate, OpSendSE, OpSendSEInvalidate:
		return QNSend, true
	case OpReadRequest:
		return QNReadRequest, true
	case OpTerminate:
		return QNTerminate, true
	}
	return 0, false
}

// Invalidates reports whether the Message carries an Invalidate STag: Send
// with Invalidate and Send with SE and Invalidate (4.1).
func (o Opcode) Invalidates() bool { return o == OpSendInvalidate || o == OpSendSEInvalidate }

// SolicitedEvent reports whether the Message is a Send with Solicited Event,
// with or without Invalidate (5.3).
func (o Opcode) SolicitedEvent() bool { return o == OpSendSE || o == OpSendSEInvalidate }

// Control is the RDMAP Control Field, carried in the first octet of DDP's
// RsvdULP (4.1, Figure 3): RV (2 bits), reserved (2 bits), OpCode (4 bits).
type Control uint8

// MakeControl returns the Control Field of an outgoing Message: RV =
// Version, reserved bits zero, the given opcode (4.1).
func MakeControl(op Opcode) Control {
	return Control(Version<<shiftRV | uint8(op)&maskOpcode)
}

// RV returns the RDMA Version field (4.1).
func (c Control) RV() uint8 { return uint8(c) >> shiftRV }

// Opcode returns the RDMA OpCode field (4.1).
func (c Control) Opcode() Opcode { return Opcode(uint8(c) & maskOpcode) }

// ParseControl checks a received RDMAP Control Field (7.2 checks 2 and 3):
// RV must be Version (ErrInvalidVersion) and the opcode defined
// (ErrUnexpectedOpcode). Reserved bits are ignored (4.1).
//
// RV is checked first, although 7.2 lists the opcode check first, because
// under another version the opcode field cannot be read. RFC 5040 also
// calls RV 00b valid "for an RNIC that complies with the RDMA Consortium's
// RDMA protocol specification", but pairs it with MPA revision 0, which
// ddpstore does not negotiate, so RV 0 is an invalid version here.
func ParseControl(b uint8) (Control, error) {
	c := Control(b)
	if c.RV() != Version {
		return c, Error{LayerRDMAP, TypeRemoteOperation, CodeInvalidVersion}
	}
	if !c.Opcode().Valid() {
		return c, Error{LayerRDMAP, TypeRemoteOperation, CodeUnexpectedOpcode}
	}
	return c, nil
}

// ControlOf returns the RDMAP Control Field of a DDP header: its first
// RsvdULP octet (4.1).
func ControlOf(h ddp.Header) Control { return Control(h.RsvdULP()) }

// InvalidateSTag returns the Invalidate STag of an untagged DDP header:
// RsvdULP[8:39] (4.1). Only Send with Invalidate and Send with SE and
// Invalidate give it meaning; others send it as zero.
func InvalidateSTag(h ddp.Header) uint32 { return h.RsvdULP32() }

// TaggedFields returns the DDP tagged header of a Message using the Tagged
// Buffer Model (RDMA Write, RDMA Read Response; Figure 4): the RDMAP
// Control Field in RsvdULP, the Data Sink's STag and the Message's first TO.
// Set Last (or call ddp.Header.SetLast) on its last segment. Other opcodes
// return ErrWrongModel.
func TaggedFields(op Opcode, stag uint32, to uint64) (ddp.TaggedFields, error) {
	if !op.Tagged() {
		return ddp.TaggedFields{}, ErrWrongModel
	}
	return ddp.TaggedFields{RsvdULP: uint8(MakeControl(op)), STag: stag, TO: to}, nil
}

// UntaggedFields returns the DDP untagged header of a Message using the
// Untagged Buffer Model (Figure 4): the RDMAP Control Field, the queue of
// the opcode, msn, MO 0, and invalidateSTag in RsvdULP[8:39] for the two
// Invalidate variants; others send that field as zero whatever is passed
// (4.1: "MUST be set to zero on transmit"). Tagged and reserved opcodes
// return ErrWrongModel.
func UntaggedFields(op Opcode, msn, invalidateSTag uint32) (ddp.UntaggedFields, error) {
	qn, ok := op.QN()
	if !ok {
		return ddp.UntaggedFields{}, ErrWrongModel
	}
	if !op.Invalidates() {
		invalidateSTag = 0
	}
	return ddp.UntaggedFields{RsvdULP: uint8(MakeControl(op)), RsvdULP32: invalidateSTag, QN: qn, MSN: msn}, nil
}
