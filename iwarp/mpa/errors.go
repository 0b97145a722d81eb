package mpa

import "strconv"

// ErrorCode is an MPA error code of RFC 5044 section 8.
type ErrorCode uint8

// The MPA error codes of RFC 5044 section 8.
const (
	// CodeLLPLost: the TCP connection was closed, terminated or lost.
	CodeLLPLost ErrorCode = 1
	// CodeCRC: a received FPDU's CRC does not match the calculated value.
	CodeCRC ErrorCode = 2
	// CodeMarker: a Marker and the ULPDU_Length framing disagree on an FPDU's start.
	CodeMarker ErrorCode = 3
	// CodeStartup: an invalid MPA Request or Reply frame was received.
	CodeStartup ErrorCode = 4
)

func (c ErrorCode) String() string {
	switch c {
	case CodeLLPLost:
		return "TCP connection closed, terminated or lost"
	case CodeCRC:
		return "CRC mismatch"
	case CodeMarker:
		return "Marker and ULPDU_Length disagree"
	case CodeStartup:
		return "invalid MPA Request or Reply frame"
	case CodeInsufficientIRD:
		return "insufficient IRD resources"
	case CodeNoMatchingRTR:
		return "no matching RTR model"
	}
	return "MPA error " + strconv.Itoa(int(c))
}

// Error is an MPA error: one defect, with the section 8 code it is reported
// under. Each defect has its own sentinel value so that callers can tell them
// apart with errors.Is and still learn the code with CodeOf.
type Error struct {
	Code ErrorCode
	msg  string
}

func (e *Error) Error() string { return "mpa: " + e.msg }

// CodeOf returns the section 8 code of err, or 0 when err is not (or does not
// wrap) an MPA *Error.
func CodeOf(err error) ErrorCode {
	for err != nil {
		if e, ok := err.(*Error); ok {
			return e.Code
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return 0
		}
		err = u.Unwrap()
	}
	return 0
}

// Full Operation errors.
var (
	// ErrLLPLost: the TCP connection was closed, terminated or lost (code 1).
	ErrLLPLost = &Error{CodeLLPLost, "TCP connection closed"}
	// ErrCRC: the CRC field of a received FPDU does not match (code 2).
	ErrCRC = &Error{CodeCRC, "FPDU CRC32c mismatch"}
	// ErrMarker: a received Marker's FPDUPTR does not point at the start of
	// the FPDU that the ULPDU_Length fields locate (code 3).
	ErrMarker = &Error{CodeMarker, "Marker FPDUPTR disagrees with ULPDU_Length framing"}
)
