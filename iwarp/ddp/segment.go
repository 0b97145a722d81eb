package ddp

// Segment is one DDP Segment of a DDP Message (5.2): Len octets of the ULP
// Message starting at Offset, with L set when Last. A tagged segment carries
// TO = initial TO + Offset, an untagged one MO = Offset.
type Segment struct {
	Offset uint32
	Len    uint32
	Last   bool
}

// Segmenter cuts a ULP Message into DDP Segments no larger than MULPDU,
// header included (5.2). It is a value with no pointers: iterate with Next;
// it allocates nothing.
type Segmenter struct {
	msgLen uint32
	max    uint32 // payload octets per segment, >= 1
	off    uint32
	done   bool
}

// NewSegmenter returns a Segmenter for a message of msgLen octets (5.2: "The
// ULP Message Length MUST be less than 2^32") sent with headers of hdrLen
// octets (TaggedHeaderLen or UntaggedHeaderLen) in DDP Segments of at most
// mulpdu octets. It returns ErrHeaderLen for another hdrLen and ErrMULPDU
// when mulpdu <= hdrLen, which leaves no room for payload.
func NewSegmenter(msgLen uint32, mulpdu, hdrLen int) (Segmenter, error) {
	if hdrLen != TaggedHeaderLen && hdrLen != UntaggedHeaderLen {
		return Segmenter{}, ErrHeaderLen
	}
	if mulpdu <= hdrLen {
		return Segmenter{}, ErrMULPDU
	}
	room := uint64(mulpdu - hdrLen)
	if room > uint64(msgLen) {
		room = uint64(msgLen)
	}
	if room == 0 {
		room = 1 // zero-length message: the value is never used
	}
	return Segmenter{msgLen: msgLen, max: uint32(room)}, nil
}

// Next returns the next segment and true, or false when the message is
// exhausted. A zero-length message yields exactly one segment, of length
// zero with Last set (5.2: "A zero-length DDP Message is allowed and MUST
// consume exactly one DDP Segment"); otherwise every segment but the last
// carries the most payload MULPDU allows.
func (s *Segmenter) Next() (Segment, bool) {
	if s.done {
		return Segment{}, false
	}
	rem := s.msgLen - s.off
	n := min(rem, s.max)
	seg := Segment{Offset: s.off, Len: n, Last: n == rem}
	s.off += n
	s.done = seg.Last
	return seg, true
}

// Count returns how many segments the whole message takes: at least one.
func (s Segmenter) Count() int {
	if s.msgLen == 0 {
		return 1
	}
	return int((uint64(s.msgLen) + uint64(s.max) - 1) / uint64(s.max))
}
