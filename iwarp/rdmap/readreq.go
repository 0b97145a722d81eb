package rdmap

import "encoding/binary"

// ReadRequestLen is the length of the RDMA Read Request Header (4.4).
const ReadRequestLen = 28

// Field offsets of the RDMA Read Request Header (4.4, Figure 6).
const (
	offSinkSTag = 0
	offSinkTO   = 4
	offRDMARDSZ = 12
	offSrcSTag  = 16
	offSrcTO    = 20
)

// ReadRequest is an RDMA Read Request Header (4.4), the whole ULP Payload
// of an RDMA Read Request Message, which immediately follows its untagged
// DDP header. ParseReadRequest returns one whose length has been checked;
// like any slice access the accessors panic on a shorter one.
type ReadRequest []byte

// SinkSTag returns the Data Sink STag: the Tagged Buffer the RDMA Read
// Response writes, copied into it without interpretation.
func (r ReadRequest) SinkSTag() uint32 { return binary.BigEndian.Uint32(r[offSinkSTag:]) }

// SinkTO returns the Data Sink Tagged Offset where the response data starts.
func (r ReadRequest) SinkTO() uint64 { return binary.BigEndian.Uint64(r[offSinkTO:]) }

// Size returns the RDMA Read Message Size (RDMARDSZ): 0 to 2^32 - 1 octets.
func (r ReadRequest) Size() uint32 { return binary.BigEndian.Uint32(r[offRDMARDSZ:]) }

// SrcSTag returns the Data Source STag: the Tagged Buffer read.
func (r ReadRequest) SrcSTag() uint32 { return binary.BigEndian.Uint32(r[offSrcSTag:]) }

// SrcTO returns the Data Source Tagged Offset where the read starts.
func (r ReadRequest) SrcTO() uint64 { return binary.BigEndian.Uint64(r[offSrcTO:]) }

// ReadRequestFields are the values of an RDMA Read Request Header (4.4).
type ReadRequestFields struct {
	SinkSTag uint32 // Data Sink STag
	SinkTO   uint64 // Data Sink Tagged Offset
	Size     uint32 // RDMA Read Message Size
	SrcSTag  uint32 // Data Source STag
	SrcTO    uint64 // Data Source Tagged Offset
}

// Encode writes the 28-octet header into b and returns ReadRequestLen, or
// ErrShortBuffer (writing nothing) when b is shorter.
func (f ReadRequestFields) Encode(b []byte) (int, error) {
	if len(b) < ReadRequestLen {
		return 0, ErrShortBuffer
	}
	b = b[:ReadRequestLen]
	binary.BigEndian.PutUint32(b[offSinkSTag:], f.SinkSTag)
	binary.BigEndian.PutUint64(b[offSinkTO:], f.SinkTO)
	binary.BigEndian.PutUint32(b[offRDMARDSZ:], f.Size)
	binary.BigEndian.PutUint32(b[offSrcSTag:], f.SrcSTag)
	binary.BigEndian.PutUint64(b[offSrcTO:], f.SrcTO)
	return ReadRequestLen, nil
}

// Fields returns the header's values.
func (r ReadRequest) Fields() ReadRequestFields {
	return ReadRequestFields{SinkSTag: r.SinkSTag(), SinkTO: r.SinkTO(), Size: r.Size(), SrcSTag: r.SrcSTag(), SrcTO: r.SrcTO()}
}

// ParseReadRequest returns the RDMA Read Request Header that is the ULP
// Payload of an RDMA Read Request Message, aliasing payload. The payload
// must be exactly ReadRequestLen octets, as the Message carries no ULP
// Message (4.2, Figure 5); otherwise it returns ErrReadRequestLen.
func ParseReadRequest(payload []byte) (ReadRequest, error) {
	if len(payload) != ReadRequestLen {
		return nil, ErrReadRequestLen
	}
	return ReadRequest(payload[:ReadRequestLen:ReadRequestLen]), nil
}
