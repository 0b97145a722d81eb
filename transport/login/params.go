package login

import "fmt"

// Params are the operational parameters of a session and connection: the
// keys of RFC 7143 section 13 and RFC 7145 section 6.
//
// As an Offer (TargetConfig.Offer, InitiatorConfig.Offer) they are what
// this node proposes or accepts: for a Minimum key (MaxBurstLength, ...) the
// largest value it supports, for a Maximum key (DefaultTime2Wait) the
// smallest, for an AND key (ImmediateData) whether it allows the feature,
// for an OR key (InitialR2T, DataPDUInOrder, DataSequenceInOrder) whether
// it requires it, and for a declarative key the value it declares. Start
// from Defaults and change what differs.
//
// In a Result they are the negotiated outcome. Declarative keys (section 6:
// each side declares its own value) appear twice, as this node's own
// declaration and the peer's (the Peer... fields); for the negotiated keys
// there is one value for both.
type Params struct {
	// MaxConnections (section 13.2, Minimum, 1 to 65535, default 1).
	MaxConnections uint32
	// InitialR2T (section 13.10, OR, default Yes) and ImmediateData
	// (section 13.11, AND, default Yes).
	InitialR2T, ImmediateData bool
	// MaxBurstLength and FirstBurstLength (sections 13.13 and 13.14,
	// Minimum, 512 to 2**24-1, defaults 262144 and 65536). FirstBurstLength
	// must not exceed MaxBurstLength.
	MaxBurstLength, FirstBurstLength uint32
	// DefaultTime2Wait (section 13.15, Maximum, 0 to 3600, default 2) and
	// DefaultTime2Retain (section 13.16, Minimum, 0 to 3600, default 20),
	// in seconds.
	DefaultTime2Wait, DefaultTime2Retain uint32
	// MaxOutstandingR2T (section 13.17, Minimum, 1 to 65535, default 1).
	MaxOutstandingR2T uint32
	// DataPDUInOrder and DataSequenceInOrder (sections 13.18 and 13.19,
	// OR, default Yes).
	DataPDUInOrder, DataSequenceInOrder bool
	// ErrorRecoveryLevel (section 13.20, Minimum, 0 to 2, default 0). This
	// implementation supports only 0: an Offer must say 0.
	ErrorRecoveryLevel uint32
	// RDMAExtensions (RFC 7145 section 6.3, AND, default No): iSER-assisted
	// mode. Ignored in an Offer: on an iSER connection both roles always
	// propose Yes and require it for Normal sessions; on a Traditional one
	// (TargetConfig.Traditional, InitiatorConfig.Traditional) the initiator
	// does not propose it and the target answers No. In a Result, whether
	// it was negotiated.
	RDMAExtensions bool
	// HeaderDigest and DataDigest (section 13.1, list-of-values, default
	// None): true means CRC32C. Only Traditional connections negotiate
	// them; iSER has no digests (RFC 7145 section 6.1), so there the Offer
	// is ignored and the Result says None (false). In an Offer, true means
	// this node supports and prefers CRC32C: it proposes "CRC32C,None" and,
	// as acceptor, takes the first of the proposer's values it supports
	// (section 6.2.1), which may be None; false means it supports only
	// None: it proposes "None" and answers Reject to a list without None.
	// In a Result, whether CRC32C was chosen.
	HeaderDigest, DataDigest bool
	// TargetRecvDataSegmentLength and InitiatorRecvDataSegmentLength (RFC
	// 7145 sections 6.4 and 6.5, Minimum, 512 to 2**24-1, default 8192):
	// the largest data segment of an iSCSI control-type PDU the target
	// (respectively the initiator) receives in the Full Feature Phase.
	// Irrelevant when RDMAExtensions=No.
	TargetRecvDataSegmentLength, InitiatorRecvDataSegmentLength uint32
	// MaxOutstandingUnexpectedPDUs (RFC 7145 section 6.7, declarative, 0
	// or 2 to 2**32-1, default 0 = no limit): how many unexpected iSCSI
	// control-type PDUs this node can receive. A target declares it only
	// in reply to an initiator that declared it (initiators that do not
	// know the key, such as Linux's, fail the login on unknown keys).
	MaxOutstandingUnexpectedPDUs uint32
	// PeerMaxOutstandingUnexpectedPDUs is what the peer declared (Result
	// only): how many unexpected PDUs this node may have outstanding
	// towards it. Ignored in an Offer.
	PeerMaxOutstandingUnexpectedPDUs uint32
	// MaxRecvDataSegmentLength (section 13.12, declarative, 512 to
	// 2**24-1, default 8192): the largest data segment this node receives.
	// Declared only when RDMAExtensions=No (Discovery sessions, and every
	// session on a Traditional connection, where both roles declare it); with
	// RDMAExtensions=Yes the key is ignored (RFC 7145 section 6.2) and in a
	// Result it is derived from TargetRecvDataSegmentLength (target) or
	// InitiatorRecvDataSegmentLength (initiator).
	MaxRecvDataSegmentLength uint32
	// PeerMaxRecvDataSegmentLength is the peer's MaxRecvDataSegmentLength
	// (Result only): the largest data segment this node may send. With
	// RDMAExtensions=Yes it is derived as RFC 7145 section 6.2 says.
	PeerMaxRecvDataSegmentLength uint32
	// PeerMaxAHSLength is the MaxAHSLength the peer declared (RFC 7145
	// section 6.8, default 256, 0 = no limit; Result only).
	PeerMaxAHSLength uint32
	// ISERHelloRequired (RFC 7145 section 6.10, declared by the initiator,
	// default No): whether the iSER Hello exchange follows the login. An
	// initiator's Offer declares Yes when set; a target records it.
	ISERHelloRequired bool
	// TaggedBufferForSolicitedDataOnly (RFC 7145 section 6.9, declared by
	// the initiator, default No): whether the Write Base Offset covers only
	// solicited data. An initiator's Offer declares Yes when set.
	TaggedBufferForSolicitedDataOnly bool
	// TaggedBufferDeclared (Result only, at a target) reports whether the
	// initiator declared TaggedBufferForSolicitedDataOnly at all. Linux's
	// and libiscsi's iSER initiators declare nothing and behave as if they
	// had declared Yes (docs/interop.md), so a target needs to know.
	TaggedBufferDeclared bool
}

// Defaults returns the default values of RFC 7143 section 13 and RFC 7145
// section 6 (RDMAExtensions=No; the iSER data segment lengths 8192, which
// apply once RDMAExtensions=Yes; MaxRecvDataSegmentLength 8192 both ways).
func Defaults() Params {
	return Params{
		MaxConnections:                   1,
		InitialR2T:                       true,
		ImmediateData:                    true,
		MaxBurstLength:                   262144,
		FirstBurstLength:                 65536,
		DefaultTime2Wait:                 2,
		DefaultTime2Retain:               20,
		MaxOutstandingR2T:                1,
		DataPDUInOrder:                   true,
		DataSequenceInOrder:              true,
		ErrorRecoveryLevel:               0,
		RDMAExtensions:                   false,
		TargetRecvDataSegmentLength:      8192,
		InitiatorRecvDataSegmentLength:   8192,
		MaxOutstandingUnexpectedPDUs:     0,
		PeerMaxOutstandingUnexpectedPDUs: 0,
		MaxRecvDataSegmentLength:         8192,
		PeerMaxRecvDataSegmentLength:     8192,
		PeerMaxAHSLength:                 256,
	}
}

// Validate checks an Offer: every value within its key's range,
// FirstBurstLength not above MaxBurstLength (section 13.14) and
// ErrorRecoveryLevel 0. The error wraps ErrConfig and names the key.
func (p *Params) Validate() error {
	for _, c := range []struct {
		key      string
		v        uint32
		min, max uint64
	}{
		{"MaxConnections", p.MaxConnections, 1, 65535},
		{"MaxBurstLength", p.MaxBurstLength, 512, 1<<24 - 1},
		{"FirstBurstLength", p.FirstBurstLength, 512, 1<<24 - 1},
		{"DefaultTime2Wait", p.DefaultTime2Wait, 0, 3600},
		{"DefaultTime2Retain", p.DefaultTime2Retain, 0, 3600},
		{"MaxOutstandingR2T", p.MaxOutstandingR2T, 1, 65535},
		{"ErrorRecoveryLevel", p.ErrorRecoveryLevel, 0, 0},
		{"TargetRecvDataSegmentLength", p.TargetRecvDataSegmentLength, 512, 1<<24 - 1},
		{"InitiatorRecvDataSegmentLength", p.InitiatorRecvDataSegmentLength, 512, 1<<24 - 1},
		{"MaxRecvDataSegmentLength", p.MaxRecvDataSegmentLength, 512, 1<<24 - 1},
	} {
		if uint64(c.v) < c.min || uint64(c.v) > c.max {
			return fmt.Errorf("%w: Offer %s=%d outside %d to %d", ErrConfig, c.key, c.v, c.min, c.max)
		}
	}
	if p.MaxOutstandingUnexpectedPDUs == 1 {
		return fmt.Errorf("%w: Offer MaxOutstandingUnexpectedPDUs=1: must be 0 or at least 2 (RFC 7145 section 6.7)", ErrConfig)
	}
	if p.FirstBurstLength > p.MaxBurstLength {
		return fmt.Errorf("%w: Offer FirstBurstLength=%d exceeds MaxBurstLength=%d (section 13.14)", ErrConfig, p.FirstBurstLength, p.MaxBurstLength)
	}
	return nil
}
