package rdmap

import (
	"math"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// ValidateHeader checks the RDMAP view of a received DDP header (7.2):
// the RDMA Version and OpCode (ParseControl: ErrInvalidVersion,
// ErrUnexpectedOpcode), then that the opcode uses the buffer model of the
// T bit and, untagged, the queue of Figure 4 (ErrUnexpectedOpcode). An
// untagged QN above QNTerminate names no queue of RDMAP's and is DDP's
// Invalid QN (ddp.ErrInvalidQN, which ErrorOf reports under LayerDDP);
// checking it here covers zero-length segments too, which DDP's 7.1 checks
// skip. h must be a whole header as ddp.Parse returns; otherwise the result
// is ddp.ErrShortHeader.
func ValidateHeader(h ddp.Header) error {
	if len(h) == 0 || len(h) < h.Len() {
		return ddp.ErrShortHeader
	}
	c, err := ParseControl(h.RsvdULP())
	if err != nil {
		return err
	}
	op := c.Opcode()
	if op.Tagged() != h.Tagged() {
		return Error{LayerRDMAP, TypeRemoteOperation, CodeUnexpectedOpcode}
	}
	if h.Tagged() {
		return nil
	}
	qn := h.QN()
	if qn > QNTerminate {
		return ddp.Error{Type: ddp.TypeUntagged, Code: ddp.CodeInvalidQN}
	}
	if want, _ := op.QN(); qn != want {
		return Error{LayerRDMAP, TypeRemoteOperation, CodeUnexpectedOpcode}
	}
	return nil
}

// Parse splits a received DDP Segment into its header and ULP Payload
// (ddp.Parse, whose errors it returns unchanged) and checks the header
// with ValidateHeader. Both results alias seg; on error both are nil.
func Parse(seg []byte) (ddp.Header, []byte, error) {
	h, p, err := ddp.Parse(seg)
	if err != nil {
		return nil, nil, err
	}
	if err := ValidateHeader(h); err != nil {
		return nil, nil, err
	}
	return h, p, nil
}

// InvalidateTarget is what the Remote Peer knows about the STag a Send
// with Invalidate or Send with SE and Invalidate names (5.3, 7.2).
type InvalidateTarget struct {
	Valid         bool // the STag exists (7.2 check 4)
	Associated    bool // it is associated with this RDMAP Stream (7.2 check 5)
	Invalidatable bool // its kind allows invalidation by the Remote Peer
}

// ValidateInvalidate checks the Invalidate STag of an incoming Send with
// Invalidate (7.2 checks 4 and 5): an STag that does not exist is
// ErrInvalidSTag; one not associated with the stream is the Remote
// Protection ErrProtectionCannotInvalidate (5.3: "issue a Terminate
// Message with the STag Cannot be Invalidated Terminate Error Code, if the
// STag is not associated with the RDMAP Stream"; Figure 10 puts Send with
// Invalidate among the causes of Remote Protection Errors); one whose kind
// cannot be invalidated remotely is the Remote Operation
// ErrOperationCannotInvalidate.
func ValidateInvalidate(t InvalidateTarget) error {
	switch {
	case !t.Valid:
		return Error{LayerRDMAP, TypeRemoteProtection, CodeInvalidSTag}
	case !t.Associated:
		return Error{LayerRDMAP, TypeRemoteProtection, CodeCannotInvalidate}
	case !t.Invalidatable:
		return Error{LayerRDMAP, TypeRemoteOperation, CodeCannotInvalidate}
	}
	return nil
}

// SourceBuffer is what the Data Source knows about the Tagged Buffer an
// RDMA Read Request's Data Source STag names (7.2).
type SourceBuffer struct {
	Valid      bool   // the STag exists (7.2 check 4a)
	Associated bool   // it is associated with this RDMAP Stream (4b)
	RemoteRead bool   // it grants remote read access
	Base       uint64 // the lowest legal TO
	Len        uint64 // how many legal TOs follow Base; Base+Len <= 2^64
}

// ValidateReadRequest checks an incoming RDMA Read Request at the Data
// Source (7.2 check 4). A zero RDMA Read Message Size is valid unchecked
// (5.2.1: the Data Source "MUST NOT validate the Data Source STag and Data
// Source Tagged Offset"). Otherwise, in the order of 7.2:
//
//	a. the Data Source STag is valid: ErrInvalidSTag;
//	b. it is associated with this stream: ErrSTagNotAssociated;
//	   it grants remote read access: ErrAccessRights (Figure 9);
//	   (a buffer whose legal offsets would run past 2^64 - 1 is a local
//	   fault: ErrLocalCatastrophic);
//	c. SrcTO is a legal offset: ErrBaseBounds;
//	e. SrcTO + Size does not wrap the 64-bit TO: ErrTOWrap;
//	d. SrcTO + Size stays within the legal offsets: ErrBaseBounds.
//
// As in ddp.ValidateTagged, e runs before d so that a wrap is reported as
// such. r must be a whole header as ParseReadRequest returns; otherwise
// the result is ErrReadRequestLen.
func ValidateReadRequest(r ReadRequest, src SourceBuffer) error {
	if len(r) < ReadRequestLen {
		return ErrReadRequestLen
	}
	size := uint64(r.Size())
	if size == 0 {
		return nil
	}
	switch {
	case !src.Valid:
		return Error{LayerRDMAP, TypeRemoteProtection, CodeInvalidSTag}
	case !src.Associated:
		return Error{LayerRDMAP, TypeRemoteProtection, CodeSTagNotAssociated}
	case !src.RemoteRead:
		return Error{LayerRDMAP, TypeRemoteProtection, CodeAccessRights}
	case src.Len != 0 && src.Base > math.MaxUint64-(src.Len-1):
		return Error{LayerRDMAP, TypeLocalCatastrophic, 0}
	}
	to := r.SrcTO()
	if to < src.Base || to-src.Base >= src.Len {
		return Error{LayerRDMAP, TypeRemoteProtection, CodeBaseBounds}
	}
	if to+size < to {
		return Error{LayerRDMAP, TypeRemoteProtection, CodeTOWrap}
	}
	if size > src.Len-(to-src.Base) {
		return Error{LayerRDMAP, TypeRemoteProtection, CodeBaseBounds}
	}
	return nil
}
