package rdmap

import (
	"strconv"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// Layer is the 4-bit Layer field of the Terminate Control: the layer that
// detected the error (4.8, Figure 9).
type Layer uint8

// The layers of Figure 9; 0x3 to 0xF are reserved.
const (
	LayerRDMAP Layer = 0x0 // RDMA
	LayerDDP   Layer = 0x1 // DDP: type and code from RFC 5041 section 7.2
	LayerLLP   Layer = 0x2 // LLP, e.g. MPA: code from RFC 5044 section 8
)

func (l Layer) String() string {
	switch l {
	case LayerRDMAP:
		return "RDMAP"
	case LayerDDP:
		return "DDP"
	case LayerLLP:
		return "LLP"
	}
	return "layer " + strconv.Itoa(int(l))
}

// ErrorType is the 4-bit EType of the Terminate Control. Its meaning
// depends on the Layer; the constants here are RDMAP's (Figure 9).
type ErrorType uint8

// The RDMAP error types of Figure 9.
const (
	TypeLocalCatastrophic ErrorType = 0x0 // Local Catastrophic Error
	TypeRemoteProtection  ErrorType = 0x1 // Remote Protection Error
	TypeRemoteOperation   ErrorType = 0x2 // Remote Operation Error
)

// TypeMPA is the EType of LLP-layer errors raised by MPA. RFC 5040 defers
// LLP values to the LLP ("For MPA, see MPA Specification"); RFC 5044
// section 8 defines codes only, so MPA errors use EType 0 with the MPA
// code as Error Code, as RFC 6581 and the IANA registry of RFC 6580 do.
const TypeMPA ErrorType = 0x0

// The RDMAP Error Codes of Figure 9. 0x09 and 0xFF occur under both Remote
// Protection and Remote Operation; the others under one type only.
const (
	CodeInvalidSTag        uint8 = 0x00 // Invalid STag (Remote Protection)
	CodeBaseBounds         uint8 = 0x01 // Base or bounds violation (Remote Protection)
	CodeAccessRights       uint8 = 0x02 // Access rights violation (Remote Protection)
	CodeSTagNotAssociated  uint8 = 0x03 // STag not associated with RDMAP Stream (Remote Protection)
	CodeTOWrap             uint8 = 0x04 // TO wrap (Remote Protection)
	CodeInvalidVersion     uint8 = 0x05 // Invalid RDMAP version (Remote Operation)
	CodeUnexpectedOpcode   uint8 = 0x06 // Unexpected OpCode (Remote Operation)
	CodeCatastrophicStream uint8 = 0x07 // Catastrophic error, localized to RDMAP Stream (Remote Operation)
	CodeCatastrophicGlobal uint8 = 0x08 // Catastrophic error, global (Remote Operation)
	CodeCannotInvalidate   uint8 = 0x09 // STag cannot be Invalidated (both)
	CodeUnspecified        uint8 = 0xff // Unspecified Error (both)
)

// Error is a Terminate error number: Layer, EType and Error Code (4.8). It
// is a comparable value: == and errors.Is match the named values below, and
// the engine copies it into a Terminate message unchanged. The functions of
// this package return constant Errors, which allocate nothing; boxing a
// named variable into an error costs a small allocation, so use those for
// comparison. DDP errors keep their RFC 5041 type and code
// under LayerDDP (FromDDP), MPA errors their RFC 5044 code under LayerLLP
// (FromMPA).
type Error struct {
	Layer Layer
	Type  ErrorType
	Code  uint8
}

// The RDMAP-layer error numbers of Figure 9. Local Catastrophic "does not
// have an error code. Any value in this field is acceptable": this package
// sends 0, and Terminate.Err reads any value as ErrLocalCatastrophic.
var (
	ErrLocalCatastrophic = Error{LayerRDMAP, TypeLocalCatastrophic, 0}

	ErrInvalidSTag                = Error{LayerRDMAP, TypeRemoteProtection, CodeInvalidSTag}
	ErrBaseBounds                 = Error{LayerRDMAP, TypeRemoteProtection, CodeBaseBounds}
	ErrAccessRights               = Error{LayerRDMAP, TypeRemoteProtection, CodeAccessRights}
	ErrSTagNotAssociated          = Error{LayerRDMAP, TypeRemoteProtection, CodeSTagNotAssociated}
	ErrTOWrap                     = Error{LayerRDMAP, TypeRemoteProtection, CodeTOWrap}
	ErrProtectionCannotInvalidate = Error{LayerRDMAP, TypeRemoteProtection, CodeCannotInvalidate}
	ErrProtectionUnspecified      = Error{LayerRDMAP, TypeRemoteProtection, CodeUnspecified}
	ErrInvalidVersion             = Error{LayerRDMAP, TypeRemoteOperation, CodeInvalidVersion}
	ErrUnexpectedOpcode           = Error{LayerRDMAP, TypeRemoteOperation, CodeUnexpectedOpcode}
	ErrCatastrophicStream         = Error{LayerRDMAP, TypeRemoteOperation, CodeCatastrophicStream}
	ErrCatastrophicGlobal         = Error{LayerRDMAP, TypeRemoteOperation, CodeCatastrophicGlobal}
	ErrOperationCannotInvalidate  = Error{LayerRDMAP, TypeRemoteOperation, CodeCannotInvalidate}
	ErrOperationUnspecified       = Error{LayerRDMAP, TypeRemoteOperation, CodeUnspecified}
)

// FromDDP returns the Terminate error number of a DDP error: Layer DDP with
// the 7.2 Error Type and Error Code unchanged (Figure 9: "See DDP
// Specification").
func FromDDP(e ddp.Error) Error { return Error{LayerDDP, ErrorType(e.Type), e.Code} }

// DDP returns the DDP error an Error with Layer DDP carries.
func (e Error) DDP() (ddp.Error, bool) {
	return ddp.Error{Type: ddp.ErrorType(e.Type), Code: e.Code}, e.Layer == LayerDDP
}

// FromMPA returns the Terminate error number of an MPA error code of RFC
// 5044 section 8 (1 to 4, and 5 to 7 of RFC 6581): Layer LLP, EType MPA.
func FromMPA(code uint8) Error { return Error{LayerLLP, TypeMPA, code} }

// MPA returns the MPA error code an Error with Layer LLP and EType MPA
// carries.
func (e Error) MPA() (uint8, bool) { return e.Code, e.Layer == LayerLLP && e.Type == TypeMPA }

// Includes reports which copied headers a Terminate for e carries per
// Figure 10: the DDP Header and DDP Segment Length for Remote Protection
// and Remote Operation errors ("Yes, if possible") and for DDP errors; the
// RDMA Header for Remote Protection errors, and then only when the
// terminated Message is an RDMA Read Request (4.8). Local Catastrophic and
// LLP errors carry neither.
func (e Error) Includes() (ddpHeader, rdmaHeader bool) {
	switch e.Layer {
	case LayerRDMAP:
		switch e.Type {
		case TypeRemoteProtection:
			return true, true
		case TypeRemoteOperation:
			return true, false
		}
	case LayerDDP:
		return e.Type != ErrorType(ddp.TypeLocalCatastrophic), false
	}
	return false, false
}

func (t ErrorType) rdmapString() string {
	switch t {
	case TypeLocalCatastrophic:
		return "local catastrophic error"
	case TypeRemoteProtection:
		return "remote protection error"
	case TypeRemoteOperation:
		return "remote operation error"
	}
	return "error type " + strconv.Itoa(int(t))
}

// codeDefined reports whether Figure 9 lists code under RDMAP error type t.
func codeDefined(t ErrorType, c uint8) bool {
	switch t {
	case TypeRemoteProtection:
		return c <= CodeTOWrap || c == CodeCannotInvalidate || c == CodeUnspecified
	case TypeRemoteOperation:
		return c >= CodeInvalidVersion && c <= CodeCannotInvalidate || c == CodeUnspecified
	}
	return false
}

func rdmapCodeString(c uint8) string {
	switch c {
	case CodeInvalidSTag:
		return "invalid STag"
	case CodeBaseBounds:
		return "base or bounds violation"
	case CodeAccessRights:
		return "access rights violation"
	case CodeSTagNotAssociated:
		return "STag not associated with RDMAP Stream"
	case CodeTOWrap:
		return "TO wrap"
	case CodeInvalidVersion:
		return "invalid RDMAP version"
	case CodeUnexpectedOpcode:
		return "unexpected OpCode"
	case CodeCatastrophicStream:
		return "catastrophic error, localized to RDMAP Stream"
	case CodeCatastrophicGlobal:
		return "catastrophic error, global"
	case CodeCannotInvalidate:
		return "STag cannot be Invalidated"
	case CodeUnspecified:
		return "unspecified error"
	}
	return "code 0x" + strconv.FormatUint(uint64(c), 16)
}

// mpaCodeString names the MPA error codes of RFC 5044 section 8 and those
// RFC 6581 adds for enhanced connection establishment.
func mpaCodeString(c uint8) string {
	switch c {
	case 1:
		return "TCP connection closed, terminated or lost"
	case 2:
		return "MPA CRC error"
	case 3:
		return "MPA Marker and ULPDU Length disagree"
	case 4:
		return "invalid MPA Request or Reply frame"
	case 5:
		return "local catastrophic error"
	case 6:
		return "insufficient IRD resources"
	case 7:
		return "no matching RTR option"
	}
	return "code " + strconv.Itoa(int(c))
}

// String names the error in the words of RFC 5040 Figure 9, RFC 5041 7.2 or
// RFC 5044 section 8, after its layer.
func (e Error) String() string {
	switch e.Layer {
	case LayerRDMAP:
		if e.Type == TypeLocalCatastrophic {
			return "RDMAP local catastrophic error"
		}
		if codeDefined(e.Type, e.Code) {
			return "RDMAP " + e.Type.rdmapString() + ": " + rdmapCodeString(e.Code)
		}
		return "RDMAP " + e.Type.rdmapString() + ": code 0x" + strconv.FormatUint(uint64(e.Code), 16)
	case LayerDDP:
		d, _ := e.DDP()
		return "DDP " + d.String()
	case LayerLLP:
		if e.Type == TypeMPA {
			return "LLP (MPA) error: " + mpaCodeString(e.Code)
		}
		return "LLP error type " + strconv.Itoa(int(e.Type)) + ": code " + strconv.Itoa(int(e.Code))
	}
	return e.Layer.String() + " error type " + strconv.Itoa(int(e.Type)) + ": code " + strconv.Itoa(int(e.Code))
}

// Error implements error.
func (e Error) Error() string { return "rdmap: " + e.String() }

// FormatError reports octets or arguments that do not form an RDMAP header
// or a usable encoder input, defects Figure 9 has no number of their own
// for. Each defect is its own sentinel. ErrorOf reports a received one as
// ErrOperationUnspecified.
type FormatError struct{ msg string }

func (e *FormatError) Error() string { return "rdmap: " + e.msg }

var (
	// ErrShortBuffer: an encoder's destination cannot hold its output.
	ErrShortBuffer = &FormatError{"buffer too short"}
	// ErrReadRequestLen: an RDMA Read Request Message's payload is not
	// exactly the 28-octet RDMA Read Request Header (4.2: no ULP Message).
	ErrReadRequestLen = &FormatError{"RDMA Read Request payload is not 28 octets"}
	// ErrShortTerminate: a Terminate Header is shorter than its HdrCt bits
	// and copied DDP header call for.
	ErrShortTerminate = &FormatError{"Terminate Header shorter than its HdrCt bits call for"}
	// ErrTerminatedHeader: a DDP header to copy into a Terminate is shorter
	// than its T bit calls for.
	ErrTerminatedHeader = &FormatError{"terminated DDP header shorter than its T bit calls for"}
	// ErrTerminatedRDMAHeader: an RDMA Header to copy into a Terminate is
	// not 28 octets, or the terminated Message is not an RDMA Read Request.
	ErrTerminatedRDMAHeader = &FormatError{"terminated RDMA header without an RDMA Read Request"}
	// ErrErrorNumber: a Layer or EType to encode does not fit in 4 bits.
	ErrErrorNumber = &FormatError{"Layer or EType wider than 4 bits"}
	// ErrWrongModel: an opcode used with the buffer model it does not use
	// (Figure 4).
	ErrWrongModel = &FormatError{"opcode does not use this DDP buffer model"}
)

// ErrorOf returns the Terminate error number to report for err: an Error
// itself, FromDDP of a ddp.Error, and ErrOperationUnspecified for anything
// else (a FormatError of either package, an error of unknown origin, or
// nil, which callers should not pass). It follows Unwrap chains and
// allocates nothing.
func ErrorOf(err error) Error {
	for err != nil {
		switch e := err.(type) {
		case Error:
			return e
		case ddp.Error:
			return FromDDP(e)
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	return Error{LayerRDMAP, TypeRemoteOperation, CodeUnspecified}
}
