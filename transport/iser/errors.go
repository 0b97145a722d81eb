package iser

// Error is a defect found while decoding or encoding an iSER message. Each
// distinct defect is its own constant, so errors.Is (and ==) work, and
// returning one allocates nothing.
type Error string

func (e Error) Error() string { return "iser: " + string(e) }

// The defects reported by this package.
const (
	ErrShort         Error = "message too short"
	ErrShortBuffer   Error = "buffer too short for encoding"
	ErrUnknownOpcode Error = "unknown iSER opcode"
	ErrWrongOpcode   Error = "iSER opcode not valid for this message"
	ErrVersion       Error = "iSER version field out of range"
)
