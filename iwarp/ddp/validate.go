package ddp

import "math"

// TaggedBuffer is what the Data Sink knows about the Tagged Buffer a
// segment's STag names, as needed by the checks of 7.1. The engine fills it
// from its memory registry, so this package needs none.
type TaggedBuffer struct {
	Valid      bool   // the STag names an existing, enabled Tagged Buffer
	Associated bool   // the STag is associated with this DDP Stream (8.3)
	Base       uint64 // the lowest legal TO
	Len        uint64 // how many legal TOs follow Base: [Base, Base+Len), Base+Len <= 2^64
}

// ValidateTagged performs the Data Sink checks of 7.1 on a tagged segment
// carrying payloadLen octets of ULP Payload into b, returning the exact 7.2
// error or nil.
//
// DV is checked first (ErrTaggedVersion). A zero-length segment is then
// valid: 7.1 applies to "non-zero length Tagged DDP Segments" and 5.2 says
// "The STag and TO fields MUST NOT be checked for a zero-length Tagged DDP
// Message". Otherwise, in the order of 7.1:
//
//  1. the STag is valid: ErrInvalidSTag;
//  2. it is associated with this stream: ErrSTagNotAssociated;
//     (a buffer whose legal offsets would run past 2^64 - 1 cannot be in a
//     sane registry, so it is reported as ErrLocalCatastrophic);
//  3. TO is a legal offset: ErrBaseBounds;
//  5. the 64-bit unsigned sum TO + payloadLen does not wrap, that is it
//     stays below 2^64 (so the TO 2^64 - 1 itself is never written): ErrTOWrap;
//  4. TO + payloadLen stays within the legal offsets: ErrBaseBounds.
//
// Check 5 runs before 4 so that a wrap is reported as the TO wrap it is
// rather than as a bounds violation; with 4 first ErrTOWrap could never be
// returned. h must be a whole tagged header, as Parse returns; otherwise
// the result is ErrShortHeader or ErrWrongModel.
func ValidateTagged(h Header, payloadLen uint32, b TaggedBuffer) error {
	if len(h) == 0 {
		return ErrShortHeader
	}
	if err := CheckVersion(h.Control()); err != nil {
		return err
	}
	if !h.Tagged() {
		return ErrWrongModel
	}
	if len(h) < TaggedHeaderLen {
		return ErrShortHeader
	}
	if payloadLen == 0 {
		return nil
	}
	if !b.Valid {
		return Error{TypeTagged, CodeInvalidSTag}
	}
	if !b.Associated {
		return Error{TypeTagged, CodeSTagNotAssociated}
	}
	if b.Len != 0 && b.Base > math.MaxUint64-(b.Len-1) {
		return Error{TypeLocalCatastrophic, codeLocalCatastrophe}
	}
	to := h.TO()
	if to < b.Base || to-b.Base >= b.Len {
		return Error{TypeTagged, CodeBaseBounds}
	}
	if to+uint64(payloadLen) < to {
		return Error{TypeTagged, CodeTOWrap}
	}
	if uint64(payloadLen) > b.Len-(to-b.Base) {
		return Error{TypeTagged, CodeBaseBounds}
	}
	return nil
}

// UntaggedQueue is what the Data Sink knows about the Untagged Buffer queue
// a segment's QN names, as needed by the checks of 7.1.
type UntaggedQueue struct {
	// Valid reports that QN names a queue of this DDP Stream.
	Valid bool
	// Posted reports that at least one buffer is available on the queue;
	// FirstMSN and LastMSN are meaningful only then.
	Posted bool
	// FirstMSN and LastMSN are the MSNs assigned to the first and the last
	// available buffer: the legal range of 7.1, inclusive, modulo 2^32 (MSN
	// wraps to 0 after 0xFFFFFFFF, 4.3), so LastMSN may be below FirstMSN.
	FirstMSN, LastMSN uint32
	// BufLen is the length of the buffer the segment's MSN selects: the
	// legal MOs are [0, BufLen). Read only when the MSN is in range (Holds).
	BufLen uint32
}

// Holds reports whether msn falls in [FirstMSN, LastMSN] modulo 2^32, that
// is whether a buffer is available for it. The engine uses it to pick the
// buffer whose length goes in BufLen.
func (q UntaggedQueue) Holds(msn uint32) bool {
	return q.Posted && msn-q.FirstMSN <= q.LastMSN-q.FirstMSN
}

// ValidateUntagged performs the Data Sink checks of 7.1 on an untagged
// segment carrying payloadLen octets of ULP Payload, q describing the queue
// its QN names, returning the exact 7.2 error or nil.
//
// DV is checked first (ErrUntaggedVersion); a zero-length segment is then
// valid, 7.1 applying to "non-zero length Untagged DDP Segments".
// Otherwise, with the checks numbered as in 7.1:
//
//  1. QN is valid for this stream: ErrInvalidQN;
//  2. the queue has a buffer that allows Placement: ErrMSNNoBuffer;
//  5. MSN is in the legal range [FirstMSN, LastMSN]: ErrMSNRange;
//  3. MO is a legal offset of the buffer: ErrInvalidMO;
//  4. MO + payloadLen stays within the buffer: ErrMessageTooLong.
//
// Check 5 runs before 3 and 4 because those test offsets "associated with
// the Untagged Buffer", and only an MSN in range selects one. h must be a
// whole untagged header, as Parse returns; otherwise the result is
// ErrShortHeader or ErrWrongModel.
func ValidateUntagged(h Header, payloadLen uint32, q UntaggedQueue) error {
	if len(h) == 0 {
		return ErrShortHeader
	}
	if err := CheckVersion(h.Control()); err != nil {
		return err
	}
	if h.Tagged() {
		return ErrWrongModel
	}
	if len(h) < UntaggedHeaderLen {
		return ErrShortHeader
	}
	if payloadLen == 0 {
		return nil
	}
	if !q.Valid {
		return Error{TypeUntagged, CodeInvalidQN}
	}
	if !q.Posted {
		return Error{TypeUntagged, CodeMSNNoBuffer}
	}
	if !q.Holds(h.MSN()) {
		return Error{TypeUntagged, CodeMSNRange}
	}
	mo := h.MO()
	if mo >= q.BufLen {
		return Error{TypeUntagged, CodeInvalidMO}
	}
	if uint64(mo)+uint64(payloadLen) > uint64(q.BufLen) {
		return Error{TypeUntagged, CodeMessageTooLong}
	}
	return nil
}
