package login

import (
	"errors"
	"fmt"
)

// Status is a login Status-Class (high octet) and Status-Detail (low
// octet), as in the table of section 11.13.5. A Status is also an error, so
// errors.Is(err, StatusAuthFailure) matches a *StatusError of that status.
type Status uint16

// The status codes of section 11.13.5.
const (
	StatusSuccess                 Status = 0x0000 // Login is proceeding OK
	StatusTargetMovedTemporarily  Status = 0x0101 // the requested target has temporarily moved
	StatusTargetMovedPermanently  Status = 0x0102 // the requested target has permanently moved
	StatusInitiatorError          Status = 0x0200 // miscellaneous initiator errors
	StatusAuthFailure             Status = 0x0201 // the initiator could not be authenticated, or target authentication is not supported
	StatusAuthorizationFailure    Status = 0x0202 // the initiator is not allowed access to the target
	StatusNotFound                Status = 0x0203 // the requested target name does not exist here
	StatusTargetRemoved           Status = 0x0204 // the target has been removed, no forwarding address
	StatusUnsupportedVersion      Status = 0x0205 // the requested version range is not supported
	StatusTooManyConnections      Status = 0x0206 // too many connections on this SSID
	StatusMissingParameter        Status = 0x0207 // missing parameters (e.g. InitiatorName, TargetName)
	StatusCantIncludeInSession    Status = 0x0208 // session spanning to this connection not supported
	StatusSessionTypeNotSupported Status = 0x0209 // session type not supported (or not from this initiator)
	StatusSessionDoesNotExist     Status = 0x020a // attempt to add a connection to a non-existent session
	StatusInvalidDuringLogin      Status = 0x020b // invalid request type during login
	StatusTargetError             Status = 0x0300 // target hardware or software error
	StatusServiceUnavailable      Status = 0x0301 // the iSCSI service or target is not currently operational
	StatusOutOfResources          Status = 0x0302 // the target has insufficient resources
)

var statusNames = map[Status]string{
	StatusSuccess:                 "Success",
	StatusTargetMovedTemporarily:  "Target moved temporarily",
	StatusTargetMovedPermanently:  "Target moved permanently",
	StatusInitiatorError:          "Initiator error",
	StatusAuthFailure:             "Authentication failure",
	StatusAuthorizationFailure:    "Authorization failure",
	StatusNotFound:                "Not found",
	StatusTargetRemoved:           "Target removed",
	StatusUnsupportedVersion:      "Unsupported version",
	StatusTooManyConnections:      "Too many connections",
	StatusMissingParameter:        "Missing parameter",
	StatusCantIncludeInSession:    "Can't include in session",
	StatusSessionTypeNotSupported: "Session type not supported",
	StatusSessionDoesNotExist:     "Session does not exist",
	StatusInvalidDuringLogin:      "Invalid during login",
	StatusTargetError:             "Target error",
	StatusServiceUnavailable:      "Service unavailable",
	StatusOutOfResources:          "Out of resources",
}

// Class is the Status-Class (octet 36 of the Login Response).
func (s Status) Class() uint8 { return uint8(s >> 8) }

// Detail is the Status-Detail (octet 37 of the Login Response).
func (s Status) Detail() uint8 { return uint8(s) }

// String is the description of section 11.13.5, or the class for an
// unallocated detail.
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	switch s.Class() {
	case 0:
		return "Success (unallocated detail)"
	case 1:
		return "Redirection (unallocated detail)"
	case 2:
		return "Initiator error (unallocated detail)"
	case 3:
		return "Target error (unallocated detail)"
	}
	return "unallocated Status-Class"
}

func (s Status) Error() string {
	return fmt.Sprintf("login status 0x%04x (%s)", uint16(s), s.String())
}

// StatusError is a login failure status (section 11.13.5): the
// Status-Class and Status-Detail a target sent (or, from a Target, will
// send) and a human reason that names the offending key and value. After a
// failure status both sides close the connection.
type StatusError struct {
	Class, Detail uint8
	Reason        string
}

// Status is Class and Detail as one code.
func (e *StatusError) Status() Status { return Status(uint16(e.Class)<<8 | uint16(e.Detail)) }

func (e *StatusError) Error() string {
	if e.Reason == "" {
		return "login failed: " + e.Status().Error()
	}
	return "login failed: " + e.Status().Error() + ": " + e.Reason
}

// Is reports whether target is the same status: a Status, or a
// *StatusError with the same Class and Detail (its Reason is not compared).
func (e *StatusError) Is(target error) bool {
	switch t := target.(type) {
	case Status:
		return t == e.Status()
	case *StatusError:
		return t != nil && t.Class == e.Class && t.Detail == e.Detail
	}
	return false
}

func statusErr(s Status, format string, args ...any) *StatusError {
	return &StatusError{Class: s.Class(), Detail: s.Detail(), Reason: fmt.Sprintf(format, args...)}
}

// Sentinel errors of the package, for errors.Is.
var (
	// ErrProtocol: the peer broke the login protocol (a target answering
	// outside the result function, an illegal stage transition, garbage
	// text, a key sent twice, ...). Returned wrapped in a *ProtocolError.
	ErrProtocol = errors.New("login: the target broke the login protocol")
	// ErrTargetAuthentication: in mutual CHAP the target's CHAP_N or CHAP_R
	// was wrong or missing (section 12.1.3: the initiator closes the
	// connection). Returned wrapped in a *ProtocolError.
	ErrTargetAuthentication = errors.New("login: the target failed CHAP authentication")
	// ErrConfig: a TargetConfig or InitiatorConfig is invalid.
	ErrConfig = errors.New("login: invalid configuration")
	// ErrFinished: Step was called after the login ended (successfully or
	// not).
	ErrFinished = errors.New("login: the login phase is over")
)

// ProtocolError is an initiator's reason to close the connection because
// the target misbehaved. Err is ErrProtocol or ErrTargetAuthentication.
type ProtocolError struct {
	Err    error
	Reason string
}

func (e *ProtocolError) Error() string { return e.Err.Error() + ": " + e.Reason }

// Unwrap returns Err.
func (e *ProtocolError) Unwrap() error { return e.Err }
