package mem

import "strconv"

// Fault is the outcome of a check of an STag, naming exactly the cases that
// RFC 5040 (RDMAP, Remote Protection Errors) and RFC 5041 (DDP, Tagged
// Buffer Errors) report differently. The engine maps each to its error code.
type Fault uint8

// The faults.
const (
	// FaultNone: the access is allowed.
	FaultNone Fault = iota
	// FaultInvalidSTag: no region has this index, the key differs, or the
	// STag was invalidated or deregistered ("Invalid STag").
	FaultInvalidSTag
	// FaultNotAssociated: the region belongs to another PD ("STag not
	// associated with RDMAP Stream" / "... DDP Stream").
	FaultNotAssociated
	// FaultAccess: the region lacks an access right that the operation
	// needs ("Access rights violation").
	FaultAccess
	// FaultTOWrap: TO plus the length overflows 64 bits ("TO wrap").
	FaultTOWrap
	// FaultBaseBounds: the range starts before the region's base TO or ends
	// past its last byte ("Base or bounds violation").
	FaultBaseBounds
	// FaultCannotInvalidate: a remote invalidation of a region that does not
	// allow it ("STag cannot be invalidated").
	FaultCannotInvalidate
)

var faultNames = [...]string{
	FaultNone:             "no fault",
	FaultInvalidSTag:      "invalid STag",
	FaultNotAssociated:    "STag not associated with the stream's PD",
	FaultAccess:           "access rights violation",
	FaultTOWrap:           "TO wrap",
	FaultBaseBounds:       "base or bounds violation",
	FaultCannotInvalidate: "STag cannot be invalidated",
}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault " + strconv.Itoa(int(f))
}
