package iscsi

// Error is a defect found while decoding or encoding iSCSI. Each distinct
// defect is its own constant, so errors.Is (and ==) work, and returning one
// allocates nothing.
type Error string

func (e Error) Error() string { return "iscsi: " + string(e) }

// The defects reported by this package.
const (
	ErrShort         Error = "PDU shorter than the 48-octet BHS"
	ErrShortBuffer   Error = "buffer too short for encoding"
	ErrUnknownOpcode Error = "unknown iSCSI opcode"
	ErrWrongOpcode   Error = "BHS opcode does not match the PDU view"
	ErrLUNFormat     Error = "LUN not in single-level peripheral or flat space format"
	ErrLUNRange      Error = "LUN number above 16383"
	ErrRange         Error = "field value out of range"

	ErrTextNoEquals     Error = "text key=value pair without '='"
	ErrTextKeyEmpty     Error = "text key empty"
	ErrTextKeyTooLong   Error = "text key longer than 63 octets"
	ErrTextKeyChar      Error = "text key has a character outside key-name"
	ErrTextValueTooLong Error = "text value longer than allowed"
	ErrTextUnterminated Error = "text key=value pair not terminated by a NUL"
	ErrTextValueChar    Error = "text value contains a NUL"
)
