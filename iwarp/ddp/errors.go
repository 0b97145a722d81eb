package ddp

import "strconv"

// ErrorType is the 4-bit Error Type of a DDP error number (7.2).
type ErrorType uint8

// The Error Types of 7.2.
const (
	TypeLocalCatastrophic ErrorType = 0x0 // Local Catastrophic
	TypeTagged            ErrorType = 0x1 // Tagged Buffer Error
	TypeUntagged          ErrorType = 0x2 // Untagged Buffer Error
	TypeLLP               ErrorType = 0x3 // reserved for the use by the LLP
)

func (t ErrorType) String() string {
	switch t {
	case TypeLocalCatastrophic:
		return "local catastrophic"
	case TypeTagged:
		return "tagged buffer error"
	case TypeUntagged:
		return "untagged buffer error"
	case TypeLLP:
		return "LLP error"
	}
	return "error type " + strconv.Itoa(int(t))
}

// Error Codes of the Tagged Buffer Error type (7.2).
const (
	CodeInvalidSTag       uint8 = 0x00 // Invalid STag
	CodeBaseBounds        uint8 = 0x01 // Base or bounds violation
	CodeSTagNotAssociated uint8 = 0x02 // STag not associated with DDP Stream
	CodeTOWrap            uint8 = 0x03 // TO wrap
	CodeTaggedVersion     uint8 = 0x04 // Invalid DDP version
)

// Error Codes of the Untagged Buffer Error type (7.2).
const (
	CodeInvalidQN        uint8 = 0x01 // Invalid QN
	CodeMSNNoBuffer      uint8 = 0x02 // Invalid MSN - no buffer available
	CodeMSNRange         uint8 = 0x03 // Invalid MSN - MSN range is not valid
	CodeInvalidMO        uint8 = 0x04 // Invalid MO
	CodeMessageTooLong   uint8 = 0x05 // DDP Message too long for available buffer
	CodeUntaggedVersion  uint8 = 0x06 // Invalid DDP version
	codeLocalCatastrophe uint8 = 0x00 // the only code of Local Catastrophic
)

// Error is a DDP error number of 7.2: an Error Type and an Error Code. It is
// a comparable value: == and errors.Is match it against the named values
// below, and RDMAP can copy the two numbers into a Terminate message
// unchanged. The functions of this package return constant Errors, which
// allocate nothing; boxing a named variable into an error (return
// ddp.ErrInvalidQN) costs a small allocation, so use those for comparison.
type Error struct {
	Type ErrorType
	Code uint8
}

// The DDP error numbers, one for each row of the 7.2 table.
var (
	ErrLocalCatastrophic = Error{TypeLocalCatastrophic, codeLocalCatastrophe}

	ErrInvalidSTag       = Error{TypeTagged, CodeInvalidSTag}
	ErrBaseBounds        = Error{TypeTagged, CodeBaseBounds}
	ErrSTagNotAssociated = Error{TypeTagged, CodeSTagNotAssociated}
	ErrTOWrap            = Error{TypeTagged, CodeTOWrap}
	ErrTaggedVersion     = Error{TypeTagged, CodeTaggedVersion}

	ErrInvalidQN       = Error{TypeUntagged, CodeInvalidQN}
	ErrMSNNoBuffer     = Error{TypeUntagged, CodeMSNNoBuffer}
	ErrMSNRange        = Error{TypeUntagged, CodeMSNRange}
	ErrInvalidMO       = Error{TypeUntagged, CodeInvalidMO}
	ErrMessageTooLong  = Error{TypeUntagged, CodeMessageTooLong}
	ErrUntaggedVersion = Error{TypeUntagged, CodeUntaggedVersion}
)

// String names the error in the words of the 7.2 table.
func (e Error) String() string {
	switch e {
	case Error{TypeLocalCatastrophic, codeLocalCatastrophe}:
		return "local catastrophic"
	case Error{TypeTagged, CodeInvalidSTag}:
		return "tagged buffer error: invalid STag"
	case Error{TypeTagged, CodeBaseBounds}:
		return "tagged buffer error: base or bounds violation"
	case Error{TypeTagged, CodeSTagNotAssociated}:
		return "tagged buffer error: STag not associated with DDP Stream"
	case Error{TypeTagged, CodeTOWrap}:
		return "tagged buffer error: TO wrap"
	case Error{TypeTagged, CodeTaggedVersion}:
		return "tagged buffer error: invalid DDP version"
	case Error{TypeUntagged, CodeInvalidQN}:
		return "untagged buffer error: invalid QN"
	case Error{TypeUntagged, CodeMSNNoBuffer}:
		return "untagged buffer error: invalid MSN - no buffer available"
	case Error{TypeUntagged, CodeMSNRange}:
		return "untagged buffer error: invalid MSN - MSN range is not valid"
	case Error{TypeUntagged, CodeInvalidMO}:
		return "untagged buffer error: invalid MO"
	case Error{TypeUntagged, CodeMessageTooLong}:
		return "untagged buffer error: DDP Message too long for available buffer"
	case Error{TypeUntagged, CodeUntaggedVersion}:
		return "untagged buffer error: invalid DDP version"
	}
	return e.Type.String() + ": code 0x" + strconv.FormatUint(uint64(e.Code), 16)
}

// Error implements error.
func (e Error) Error() string { return "ddp: " + e.String() }

// FormatError reports octets or arguments that are not a DDP header at all,
// a defect 7.2 has no number for. Each defect is its own sentinel.
type FormatError struct{ msg string }

func (e *FormatError) Error() string { return "ddp: " + e.msg }

var (
	// ErrShortHeader: a segment (or a Header handed to a validator) is
	// shorter than the header its T bit calls for.
	ErrShortHeader = &FormatError{"segment shorter than its DDP header"}
	// ErrShortBuffer: an encoder's destination cannot hold the header.
	ErrShortBuffer = &FormatError{"buffer shorter than the DDP header"}
	// ErrWrongModel: a tagged header was given to ValidateUntagged or an
	// untagged one to ValidateTagged.
	ErrWrongModel = &FormatError{"header of the other buffer model"}
	// ErrHeaderLen: a segmentation header length other than 14 or 18.
	ErrHeaderLen = &FormatError{"header length is neither 14 nor 18"}
	// ErrMULPDU: a MULPDU that leaves no room for payload after the header.
	ErrMULPDU = &FormatError{"MULPDU leaves no room for ULP Payload"}
)
