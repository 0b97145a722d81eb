package rdmap

import (
	"encoding/binary"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// Lengths of the parts of a Terminate Header (4.8, Figure 7).
const (
	// TerminateControlLen covers Terminate Control (19 bits) and Reserved
	// (13 bits): the only part always present.
	TerminateControlLen = 4
	// SegmentLengthLen is the DDP Segment Length field, present when M or
	// D is set.
	SegmentLengthLen = 2
	// MaxTerminateLen is the longest Terminate Header: control, DDP Segment
	// Length, an untagged DDP header and an RDMA Read Request Header.
	MaxTerminateLen = TerminateControlLen + SegmentLengthLen + ddp.UntaggedHeaderLen + ReadRequestLen
)

// The HdrCt bits, bits 16 to 18 of the Terminate Control (4.8, Figure 8),
// in its third octet.
const (
	hdrM   = 0x80 // DDP Segment Length valid
	hdrD   = 0x40 // DDP Header Included
	hdrR   = 0x20 // RDMAP Header Included
	offErr = 1
	offHdr = 2
)

// Terminate is a Terminate Header (4.8), the whole ULP Payload of a
// Terminate Message, laid out as Figure 7:
//
//	Terminate Control: Layer (4 bits), EType (4), Error Code (8), HdrCt M D R (3)
//	Reserved (13 bits)
//	DDP Segment Length (16 bits), if M or D is set
//	Terminated DDP Header (14 or 18 octets by its own T bit), if D is set
//	Terminated RDMA Header (28 octets), if R is set and the terminated
//	Message is an RDMA Read Request
//
// ParseTerminate returns one whose length has been checked. Like any slice
// access, the accessors of the control octets panic on a shorter slice; the
// accessors of optional parts return nil or zero when the part is absent.
type Terminate []byte

// Layer returns the layer that detected the error (Figure 9).
func (t Terminate) Layer() Layer { return Layer(t[0] >> 4) }

// EType returns the error type, whose meaning depends on Layer.
func (t Terminate) EType() ErrorType { return ErrorType(t[0] & 0x0f) }

// ErrorCode returns the Error Code as received.
func (t Terminate) ErrorCode() uint8 { return t[offErr] }

// Err returns the error number the Terminate reports. An RDMAP Local
// Catastrophic Error "does not have an error code. Any value in this field
// is acceptable" (Figure 9), so any such Terminate yields
// ErrLocalCatastrophic.
func (t Terminate) Err() Error {
	e := Error{t.Layer(), t.EType(), t.ErrorCode()}
	if e.Layer == LayerRDMAP && e.Type == TypeLocalCatastrophic {
		e.Code = 0
	}
	return e
}

// M reports the HdrCt M bit: the DDP Segment Length is valid.
func (t Terminate) M() bool { return t[offHdr]&hdrM != 0 }

// D reports the HdrCt D bit: the terminated DDP Header is included.
func (t Terminate) D() bool { return t[offHdr]&hdrD != 0 }

// R reports the HdrCt R bit: the terminated RDMA Header is included.
func (t Terminate) R() bool { return t[offHdr]&hdrR != 0 }

// SegmentLength returns the DDP Segment Length field: "The length handed
// up by the DDP layer when the error was detected. It MUST be valid if the
// M bit is set." It returns 0 when the field is absent.
func (t Terminate) SegmentLength() uint16 {
	l, err := terminateLayout(t)
	if err != nil || l.segLen < 0 {
		return 0
	}
	return binary.BigEndian.Uint16(t[l.segLen:])
}

// DDPHeader returns the terminated DDP Header, aliasing t, or nil when D is
// clear. It is a copy of an offending header: its DV and other fields are
// whatever the peer received.
func (t Terminate) DDPHeader() ddp.Header {
	l, err := terminateLayout(t)
	if err != nil || l.ddp < 0 {
		return nil
	}
	return ddp.Header(t[l.ddp:l.rdma:l.rdma])
}

// RDMAHeader returns the terminated RDMA Read Request Header, aliasing t,
// or nil when it is absent.
func (t Terminate) RDMAHeader() ReadRequest {
	l, err := terminateLayout(t)
	if err != nil || !l.hasRDMA {
		return nil
	}
	return ReadRequest(t[l.rdma:l.end:l.end])
}

// layout gives the offsets of a Terminate Header's optional parts; -1 for
// an absent one.
type layout struct {
	segLen, ddp, rdma, end int
	hasRDMA                bool
}

// terminateLayout locates the parts of a Terminate Header from its HdrCt
// bits and the T bit of the copied DDP header.
//
// The DDP Segment Length "MUST be valid if the M bit is set. It MUST be
// present when the D bit is set", so it is present when either is set. The
// RDMA header "is only sent back if the terminate is associated with an
// RDMA Read Request Message": when the copied DDP header names another
// opcode, R does not bring one. (Linux soft-iWARP sets R on every Remote
// Protection Error, also for a Send with Invalidate, and then sends no
// RDMA header.)
func terminateLayout(b []byte) (layout, error) {
	if len(b) < TerminateControlLen {
		return layout{}, ErrShortTerminate
	}
	hdr := b[offHdr]
	l := layout{segLen: -1, ddp: -1}
	off := TerminateControlLen
	if hdr&(hdrM|hdrD) != 0 {
		l.segLen = off
		off += SegmentLengthLen
	}
	readRequest := true
	if hdr&hdrD != 0 {
		if len(b) <= off {
			return layout{}, ErrShortTerminate
		}
		l.ddp = off
		off += ddp.Control(b[off]).HeaderLen()
		if len(b) < off {
			return layout{}, ErrShortTerminate
		}
		readRequest = ControlOf(b[l.ddp:off]).Opcode() == OpReadRequest
	}
	l.rdma = off
	if hdr&hdrR != 0 && readRequest {
		l.hasRDMA = true
		off += ReadRequestLen
	}
	if len(b) < off {
		return layout{}, ErrShortTerminate
	}
	l.end = off
	return l, nil
}

// ParseTerminate returns the Terminate Header that is the ULP Payload of a
// Terminate Message, aliasing payload and cut to the parts its HdrCt bits
// announce. It returns ErrShortTerminate when payload is shorter than
// those. Octets past the header are ignored (RFC 5040 7.1 lets a sender
// include zeroed header fields), as are the reserved bits (4.8); Layer,
// EType and Error Code are returned as received.
func ParseTerminate(payload []byte) (Terminate, error) {
	l, err := terminateLayout(payload)
	if err != nil {
		return nil, err
	}
	return Terminate(payload[:l.end:l.end]), nil
}

// Len returns the length of the Terminate Header its HdrCt bits announce,
// or 0 when t is too short for it.
func (t Terminate) Len() int {
	l, err := terminateLayout(t)
	if err != nil {
		return 0
	}
	return l.end
}

// TerminateFields are the values of a Terminate Header (4.8).
type TerminateFields struct {
	// Err is the error reported: Layer, EType, Error Code.
	Err Error
	// SegmentLength is the length of the terminated DDP Segment, header
	// included: the ULPDU MPA handed up (RFC 5041 7.1, "the length of the
	// DDP segment"; RFC 5040 7.1 calls it "ULP PDU Length").
	SegmentLength uint16
	// SegmentLengthValid sets M: SegmentLength is valid. The field is
	// sent when M or D is set.
	SegmentLengthValid bool
	// DDPHeader, when not nil, is copied as the terminated DDP Header and
	// sets D. Only the 14 or 18 octets its T bit calls for are copied, so
	// the whole received segment may be passed.
	DDPHeader ddp.Header
	// RDMAHeader, when not nil, is copied as the terminated RDMA Header
	// and sets R. Only the first 28 octets are copied. A DDPHeader given
	// with it must be that of an RDMA Read Request.
	RDMAHeader ReadRequest
}

// Len returns the length of the encoded Terminate Header, or an error when
// the fields cannot be encoded (see Encode).
func (f TerminateFields) Len() (int, error) {
	if f.Err.Layer > 0x0f || f.Err.Type > 0x0f {
		return 0, ErrErrorNumber
	}
	n := TerminateControlLen
	if f.SegmentLengthValid || f.DDPHeader != nil {
		n += SegmentLengthLen
	}
	if f.DDPHeader != nil {
		if len(f.DDPHeader) == 0 || len(f.DDPHeader) < f.DDPHeader.Len() {
			return 0, ErrTerminatedHeader
		}
		n += f.DDPHeader.Len()
	}
	if f.RDMAHeader != nil {
		if len(f.RDMAHeader) < ReadRequestLen {
			return 0, ErrTerminatedRDMAHeader
		}
		if f.DDPHeader != nil && !isReadRequest(f.DDPHeader) {
			return 0, ErrTerminatedRDMAHeader
		}
		n += ReadRequestLen
	}
	return n, nil
}

// Encode writes the Terminate Header into b with the reserved bits zero
// and returns its length. It writes nothing and returns ErrShortBuffer when
// b is too short, ErrErrorNumber when Layer or EType exceeds 4 bits,
// ErrTerminatedHeader when DDPHeader is shorter than its T bit calls for,
// and ErrTerminatedRDMAHeader when RDMAHeader is shorter than 28 octets or
// DDPHeader is not an RDMA Read Request's.
func (f TerminateFields) Encode(b []byte) (int, error) {
	n, err := f.Len()
	if err != nil {
		return 0, err
	}
	if len(b) < n {
		return 0, ErrShortBuffer
	}
	b[0] = uint8(f.Err.Layer)<<4 | uint8(f.Err.Type)
	b[offErr] = f.Err.Code
	var hdr uint8
	if f.SegmentLengthValid {
		hdr |= hdrM
	}
	if f.DDPHeader != nil {
		hdr |= hdrD
	}
	if f.RDMAHeader != nil {
		hdr |= hdrR
	}
	b[offHdr] = hdr
	b[3] = 0
	off := TerminateControlLen
	if hdr&(hdrM|hdrD) != 0 {
		binary.BigEndian.PutUint16(b[off:], f.SegmentLength)
		off += SegmentLengthLen
	}
	if f.DDPHeader != nil {
		off += copy(b[off:], f.DDPHeader[:f.DDPHeader.Len()])
	}
	if f.RDMAHeader != nil {
		off += copy(b[off:], f.RDMAHeader[:ReadRequestLen])
	}
	return off, nil
}

// NewTerminate returns the Terminate fields that report e about a received
// DDP Segment, following Figure 10 and 7.1: the segment's DDP header and
// length when e includes them and hdr is not nil ("Yes, if possible"; pass
// nil when the header's layout is unknown, as after a version error), and
// the RDMA Read Request Header rr for a Remote Protection Error when rr is
// not nil and hdr, if given, is an RDMA Read Request's. segLen is the
// length of the whole segment, header included.
func NewTerminate(e Error, hdr ddp.Header, segLen uint16, rr ReadRequest) TerminateFields {
	f := TerminateFields{Err: e}
	withDDP, withRDMA := e.Includes()
	if withDDP && hdr != nil {
		f.DDPHeader = hdr
		f.SegmentLength = segLen
		f.SegmentLengthValid = true
	}
	if withRDMA && rr != nil && (f.DDPHeader == nil || isReadRequest(f.DDPHeader)) {
		f.RDMAHeader = rr
	}
	return f
}

// isReadRequest reports whether h is long enough to hold an RDMAP Control
// Field and names an RDMA Read Request.
func isReadRequest(h ddp.Header) bool {
	return len(h) > 1 && ControlOf(h).Opcode() == OpReadRequest
}
