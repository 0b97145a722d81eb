package sctp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Function is a DDP Stream Session Control function code (section 5.2.3).
type Function uint16

// The function codes of section 5.2.3.
const (
	FuncInitiate  Function = 0x001 // DDP Stream Session Initiate
	FuncAccept    Function = 0x002 // DDP Stream Session Accept
	FuncReject    Function = 0x003 // DDP Stream Session Reject
	FuncTerminate Function = 0x004 // DDP Stream Session Terminate
)

func (f Function) String() string {
	switch f {
	case FuncInitiate:
		return "Session Initiate"
	case FuncAccept:
		return "Session Accept"
	case FuncReject:
		return "Session Reject"
	case FuncTerminate:
		return "Session Terminate"
	}
	return fmt.Sprintf("Function(%#x)", uint16(f))
}

// MaxPrivateData is the most Private Data any Session Control message
// carries (5.2.3: "MUST NOT exceed 512 bytes").
const MaxPrivateData = 512

// ControlHeaderLen is the length of a Session Control message without its
// Private Data.
const ControlHeaderLen = 4

// MaxControlLen is the longest Session Control message.
const MaxControlLen = ControlHeaderLen + MaxPrivateData

// Errors of a Session Control message that breaks section 5.2.3.
var (
	ErrShortControl       = errors.New("sctp: Session Control message shorter than 4 octets")
	ErrUnknownFunction    = errors.New("sctp: unknown Session Control function code")
	ErrPrivateDataTooLong = errors.New("sctp: Private Data longer than 512 octets")
	ErrTerminateData      = errors.New("sctp: Session Terminate with Private Data")
)

// Control is a DDP Stream Session Control message (section 5.2.3), the user
// data of a Payload Data Chunk with PPID 0x11:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          DDP-SSN              |    Function Code              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Private Data (Dependent on Function Code)          |
//	|                         ...                                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Initiate, Accept and Reject carry the ULP's Private Data, possibly none;
// Terminate carries none. The Private Data has no length field: it is the
// rest of the chunk.
type Control []byte

// ParseControl validates b as a Session Control message.
func ParseControl(b []byte) (Control, error) {
	if len(b) < ControlHeaderLen {
		return nil, ErrShortControl
	}
	c := Control(b)
	switch c.Function() {
	case FuncInitiate, FuncAccept, FuncReject:
	case FuncTerminate:
		if len(b) > ControlHeaderLen {
			return nil, ErrTerminateData
		}
	default:
		return nil, fmt.Errorf("%w %#x", ErrUnknownFunction, uint16(c.Function()))
	}
	if len(b)-ControlHeaderLen > MaxPrivateData {
		return nil, ErrPrivateDataTooLong
	}
	return c, nil
}

// SSN returns the message's DDP-SSN.
func (c Control) SSN() uint16 { return binary.BigEndian.Uint16(c) }

// Function returns the function code.
func (c Control) Function() Function { return Function(binary.BigEndian.Uint16(c[2:])) }

// PrivateData returns the Private Data (a view into c).
func (c Control) PrivateData() []byte { return c[ControlHeaderLen:] }

// AppendControl appends a Session Control message to b. It refuses what
// section 5.2.3 forbids: an unknown function, Private Data on a Terminate,
// more than 512 octets of it.
func AppendControl(b []byte, ssn uint16, f Function, pd []byte) ([]byte, error) {
	switch {
	case f < FuncInitiate || f > FuncTerminate:
		return b, fmt.Errorf("%w %#x", ErrUnknownFunction, uint16(f))
	case f == FuncTerminate && len(pd) > 0:
		return b, ErrTerminateData
	case len(pd) > MaxPrivateData:
		return b, ErrPrivateDataTooLong
	}
	b = binary.BigEndian.AppendUint16(b, ssn)
	b = binary.BigEndian.AppendUint16(b, uint16(f))
	return append(b, pd...), nil
}
