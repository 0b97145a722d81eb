package sctp

import (
	"encoding/binary"
	"errors"
)

// Payload Protocol Identifiers of the two kinds of Payload Data Chunks
// (section 5.2).
const (
	PPIDSegment uint32 = 0x10 // DDP Segment Chunk
	PPIDControl uint32 = 0x11 // DDP Stream Session Control
)

// AdaptationIndication is the Adaptation Indication value of DDP (section
// 5.1), carried in the Adaptation Layer Indication parameter (type 0xC006)
// of INIT and INIT-ACK.
const AdaptationIndication uint32 = 0x00000001

// SSNLen is the length of the DDP-SSN that leads every chunk.
const SSNLen = 2

// ErrShortChunk is a Payload Data Chunk too short for its DDP-SSN.
var ErrShortChunk = errors.New("sctp: chunk shorter than its DDP-SSN")

// SegmentChunk is the user data of a DDP Segment Chunk (section 5.2.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          DDP-SSN              |         DDP Segment           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               |
//	|                                                               |
//	|                         ...                                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The DDP-SSN (5.2.1) is the stream's sequence number of the chunk: the
// value SCTP's SSN would have had, had the chunk been sent ordered. It is
// reset to zero at the start of each DDP Stream Session (6.1) and counts
// control and segment chunks alike.
type SegmentChunk []byte

// ParseSegmentChunk checks that b holds a DDP-SSN and returns it as a
// SegmentChunk. The DDP Segment itself is DDP's to validate.
func ParseSegmentChunk(b []byte) (SegmentChunk, error) {
	if len(b) < SSNLen {
		return nil, ErrShortChunk
	}
	return SegmentChunk(b), nil
}

// SSN returns the chunk's DDP-SSN.
func (c SegmentChunk) SSN() uint16 { return binary.BigEndian.Uint16(c) }

// Segment returns the DDP Segment the chunk carries.
func (c SegmentChunk) Segment() []byte { return c[SSNLen:] }

// PutSSN writes a DDP-SSN into the first two octets of b.
func PutSSN(b []byte, ssn uint16) { binary.BigEndian.PutUint16(b, ssn) }
