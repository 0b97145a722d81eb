package mpa

import (
	"errors"
	"fmt"
)

// Error codes that RFC 6581 adds to the MPA errors of RFC 5044 section 8,
// for enhanced connection establishment only. (Linux siw sends them in a
// Terminate as LLP_ECODE_INSUFFICIENT_IRD and LLP_ECODE_NO_MATCHING_RTR.)
const (
	// CodeInsufficientIRD: the peer's IRD cannot carry this end's ORD, or
	// the peer's ORD exceeds this end's IRD.
	CodeInsufficientIRD ErrorCode = 6
	// CodeNoMatchingRTR: the Initiator and Responder share no RTR type.
	CodeNoMatchingRTR ErrorCode = 7
)

// Negotiation errors. ErrRevisionMismatch is an invalid Reply (code 4);
// ErrInsufficientIRD and ErrNoMatchingRTR carry the RFC 6581 codes 6 and 7.
// ErrRejected and ErrMarkersRefused are not MPA errors at all (CodeOf
// returns 0): the frame was valid but the connection is not wanted, so
// "the implementation MUST exit MPA, leaving the TCP connection open"
// (RFC 5044 7.1.2 rules 2 and 3).
var (
	// ErrRevisionMismatch: a Reply's Rev is higher than the Request's. A
	// Responder answers with the Initiator's revision or a lower one.
	ErrRevisionMismatch = &Error{CodeStartup, "MPA Reply revision is higher than the Request's"}
	// ErrInsufficientIRD: the Responder's ORD in its Reply exceeds the
	// Initiator's IRD.
	ErrInsufficientIRD = &Error{CodeInsufficientIRD, "peer ORD exceeds local IRD (insufficient IRD)"}
	// ErrNoMatchingRTR: the peer-to-peer model was asked for, but no RTR
	// type is supported by both ends.
	ErrNoMatchingRTR = &Error{CodeNoMatchingRTR, "no RTR type supported by both ends"}
	// ErrRejected: the Reply has R set; the Responder's ULP rejected the
	// connection (RFC 5044 7.1.2 rule 3). Its Private Data may say why.
	ErrRejected = errors.New("mpa: connection rejected by the Responder (R bit)")
	// ErrMarkersRefused: the peer requires Markers (M bit) in the FPDUs this
	// end sends, and StartupConfig.RefuseMarkers says it cannot add them. A
	// Responder answers with a rejecting Reply (Negotiated.Reply).
	ErrMarkersRefused = errors.New("mpa: peer requires Markers, which this end refuses to send")
)

// Role is the part an endpoint plays in MPA startup: "The Initiator is the
// side that sends first in the MPA startup sequence (the MPA Request
// Frame)" (RFC 5044 7.1); it is not related to who opened the TCP
// connection.
type Role uint8

const (
	// Initiator sends the MPA Request and receives the Reply.
	Initiator Role = 1 + iota
	// Responder receives the MPA Request and sends the Reply.
	Responder
)

func (r Role) String() string {
	switch r {
	case Initiator:
		return "Initiator"
	case Responder:
		return "Responder"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// StartupConfig is one endpoint's side of MPA startup. The zero value is a
// revision-2 endpoint that wants CRCs, no Markers, no RDMA Reads and the
// client-server model.
type StartupConfig struct {
	// Revision is the highest MPA revision spoken: Rev1 or Rev2; 0 means
	// Rev2.
	Revision uint8
	// Markers sets M: this end requires Markers in the FPDUs it receives.
	Markers bool
	// RefuseMarkers: this end cannot add Markers to the FPDUs it sends, so
	// a peer that sets M is refused (ErrMarkersRefused). Linux siw refuses
	// Markers this way.
	RefuseMarkers bool
	// NoCRC clears C: this end prefers not to use CRCs. RFC 5044 4.4 allows
	// it only "on the explicit request of the system administrator"; CRCs
	// are still used when the peer sets C.
	NoCRC bool
	// IRD and ORD (revision 2) are the largest Inbound and Outbound RDMA
	// Read Queue Depths this end supports. Values of IRDORDUnspecified
	// (0x3fff) and above mean "no limit stated"; see Negotiate.
	IRD, ORD uint16
	// PeerToPeer (Initiator, revision 2) asks for the peer-to-peer model:
	// flag A, with the RTR types of RTR offered in flags B, C and D.
	PeerToPeer bool
	// RTR is the set of RTR types this end can send (Initiator) or accept
	// as its first received FPDU (Responder). Zero means RTRWrite|RTRRead.
	RTR RTR
}

func (c *StartupConfig) rev() uint8 {
	if c.Revision == 0 {
		return Rev2
	}
	return c.Revision
}

func (c *StartupConfig) rtr() RTR {
	if c.RTR == 0 {
		return RTRWrite | RTRRead
	}
	return c.RTR & AllRTR
}

// Request builds the MPA Request an Initiator with this configuration sends
// (RFC 5044 7.1.2 rule 1), with pd as the ULP's Private Data: at most 512
// octets in revision 1, 508 in revision 2. R and Res are zero; revision 2
// sets FlagEnhanced and the IRD/ORD word.
func (c *StartupConfig) Request(pd []byte) Startup {
	rev := c.rev()
	f := Startup{Kind: Request, M: c.Markers, C: !c.NoCRC, Rev: rev, PrivateData: pd}
	if rev == Rev2 {
		f.Enhanced = true
		f.IRDORD = IRDORD{IRD: clampIRDORD(c.IRD), ORD: clampIRDORD(c.ORD)}
		if c.PeerToPeer {
			f.IRDORD.PeerToPeer = true
			f.IRDORD.RTR = c.rtr()
		}
	}
	return f
}

// Negotiated is the outcome of MPA startup for one endpoint: what it uses in
// Full Operation.
type Negotiated struct {
	// Role is this end's role.
	Role Role
	// Rev is the revision in use: the Responder answers with the lower of
	// the Request's revision and its own, and the Initiator follows it.
	Rev uint8
	// TxMarkers: this end adds Markers to the FPDUs it sends, because the
	// peer's frame has M set. "When in a received MPA Request Frame or MPA
	// Reply Frame and the value is '0', Markers MUST NOT be added to the
	// data stream by that endpoint" (RFC 5044 7.1.1).
	TxMarkers bool
	// RxMarkers: the peer adds Markers to the FPDUs it sends, because this
	// end's frame has M set.
	RxMarkers bool
	// CRC: CRCs are generated and checked in both directions. Off only when
	// both frames have C clear (RFC 5044 4.4 (2b), 7.1.1).
	CRC bool
	// IRD and ORD are this end's Inbound and Outbound RDMA Read Queue
	// Depths. In revision 2 they are negotiated; IRDORDUnspecified means
	// neither end stated a limit and the ULP decides. In revision 1 they are
	// this end's configured values: RFC 5044 leaves them to the ULP's
	// Private Data.
	IRD, ORD uint16
	// PeerToPeer: the peer-to-peer model is in use (revision 2 only). The
	// Initiator sends an RTR message of type RTR as its first FPDU; the
	// Responder waits for it.
	PeerToPeer bool
	// RTR is the single RTR type agreed when PeerToPeer, else 0.
	RTR RTR

	// Our M and C, for building the Reply.
	m, c bool
}

// Reply builds the MPA Reply a Responder sends after Negotiate, with pd as
// the ULP's Private Data (at most 512 octets in revision 1, 508 in revision
// 2) and R set when reject. When Negotiate failed with ErrMarkersRefused or
// ErrNoMatchingRTR the result is still usable as a rejecting Reply (RFC 5044
// 7.1.2 rule 2: "the implementation SHOULD return an MPA Reply Frame with
// the Rejected Connection bit set to '1'").
//
// The Reply carries this end's M and C, and in revision 2 the IRD/ORD word
// with the Responder's negotiated IRD and ORD, flag A when the peer-to-peer
// model is accepted, and exactly the chosen RTR type.
func (n *Negotiated) Reply(reject bool, pd []byte) Startup {
	// C: this end's preference, and set whenever CRCs will be used anyway
	// (the Request had C): "When this bit is '1' in either ... CRCs MUST be
	// generated and checked by both endpoints" (7.1.1), so the Reply says
	// nothing new, but Linux siw as Initiator with mpa_crc_required refuses
	// a Reply with C clear even then, as it does not recompute the outcome.
	f := Startup{Kind: Reply, M: n.m, C: n.c || n.CRC, R: reject, Rev: n.Rev, PrivateData: pd}
	if f.Rev == Rev2 {
		f.Enhanced = true
		f.IRDORD = IRDORD{IRD: n.IRD, ORD: n.ORD, PeerToPeer: n.PeerToPeer, RTR: n.RTR}
	}
	return f
}

// Negotiate computes the connection parameters of an endpoint from its
// configuration and the frame its peer sent: the Request for a Responder,
// the Reply for an Initiator (whose own Request is local.Request). It is a
// pure function.
//
// Markers are chosen per direction: an end adds Markers when the peer's
// frame has M. CRCs are used unless both frames have C clear.
//
// Revision (RFC 6581, as Linux siw and cxgb4 implement it): a Responder
// answers with the lower of its revision and the Request's, so a revision-2
// Responder answers a revision-1 Initiator with revision 1 and RFC 5044
// rules; an Initiator accepts a Reply of its own revision or lower (falling
// back to revision 1 without IRD/ORD), and a higher one is
// ErrRevisionMismatch.
//
// IRD and ORD (revision 2, RFC 6581, with the rules of Linux siw and cxgb4
// under their relaxed IRD negotiation): each end's ORD is limited by the
// peer's IRD. The Responder replies with IRD = min(its IRD, Initiator's ORD)
// and ORD = min(its ORD, Initiator's IRD). The Initiator then uses
// ORD = min(its ORD, Responder's IRD) and IRD = Responder's ORD, and fails
// with ErrInsufficientIRD when the Responder's ORD exceeds its IRD. A value of
// IRDORDUnspecified (0x3fff) states no limit and drops out of each min.
//
// RTR (revision 2): when the Request sets flag A the Responder picks one RTR
// type that the Request offers and local.RTR accepts. This package prefers,
// as siw does, a zero-length RDMA Write, which costs the Responder nothing
// (nes and i40iw prefer a Read); then a zero-length RDMA Read, which takes
// one IRD and is not chosen when the Responder's negotiated IRD is 0; then a
// zero-length Send, which takes a posted Receive. None is ErrNoMatchingRTR.
// An Initiator that asked for the peer-to-peer model accepts a Reply without
// flag A as the client-server model, and fails with ErrNoMatchingRTR when the
// Reply's RTR type is not one it offered.
//
// A Reply with R set gives ErrRejected. Errors in the peer frame's Kind or Rev
// are those of ParseStartupHeader. The returned Negotiated is filled in as far
// as negotiation got, also on error.
func Negotiate(role Role, local *StartupConfig, peer *Startup) (Negotiated, error) {
	n := Negotiated{Role: role, m: local.Markers, c: !local.NoCRC}
	lrev := local.rev()
	if lrev != Rev1 && lrev != Rev2 {
		return n, fmt.Errorf("mpa: StartupConfig.Revision %d is neither 1 nor 2", local.Revision)
	}
	switch {
	case peer.Kind != Request && peer.Kind != Reply:
		return n, fmt.Errorf("%w: Kind %v", ErrStartupKey, peer.Kind)
	case role == Initiator && peer.Kind == Request:
		return n, ErrInitiatorInitiator
	case role == Responder && peer.Kind == Reply:
		return n, ErrUnexpectedReply
	case role != Initiator && role != Responder:
		return n, fmt.Errorf("mpa: Negotiate with %v", role)
	}
	if peer.Rev != Rev1 && peer.Rev != Rev2 {
		return n, fmt.Errorf("%w: Rev %d", ErrStartupRevision, peer.Rev)
	}
	if role == Initiator && peer.R {
		n.Rev = peer.Rev
		return n, ErrRejected
	}

	n.TxMarkers = peer.M
	n.RxMarkers = local.Markers
	n.CRC = peer.C || !local.NoCRC
	n.IRD, n.ORD = clampIRDORD(local.IRD), clampIRDORD(local.ORD)

	var err error
	if role == Responder {
		n.Rev = min(lrev, peer.Rev)
		if n.Rev == Rev2 {
			err = n.respond(local, peer.IRDORD)
		}
	} else {
		n.Rev = peer.Rev
		switch {
		case peer.Rev > lrev:
			err = fmt.Errorf("%w: Request Rev %d, Reply Rev %d", ErrRevisionMismatch, lrev, peer.Rev)
		case n.Rev == Rev2:
			err = n.initiate(local, peer.IRDORD)
		}
	}
	if err == nil && peer.M && local.RefuseMarkers {
		err = ErrMarkersRefused
	}
	return n, err
}

// respond fills in a revision-2 Responder's IRD, ORD and RTR from the
// Initiator's IRD/ORD word.
func (n *Negotiated) respond(local *StartupConfig, req IRDORD) error {
	n.ORD = min(n.ORD, clampIRDORD(req.IRD))
	n.IRD = min(n.IRD, clampIRDORD(req.ORD))
	if !req.PeerToPeer {
		return nil
	}
	n.PeerToPeer = true
	can := req.RTR & local.rtr()
	if n.IRD == 0 {
		can &^= RTRRead // a zero-length RDMA Read needs one IRD here
	}
	if n.RTR = pickRTR(can); n.RTR == 0 {
		return fmt.Errorf("%w: Initiator offers %v, Responder accepts %v", ErrNoMatchingRTR, req.RTR, local.rtr())
	}
	return nil
}

// initiate fills in a revision-2 Initiator's IRD, ORD and RTR from the
// Responder's IRD/ORD word.
func (n *Negotiated) initiate(local *StartupConfig, rep IRDORD) error {
	repIRD, repORD := clampIRDORD(rep.IRD), clampIRDORD(rep.ORD)
	if repORD != IRDORDUnspecified {
		if repORD > n.IRD {
			err := fmt.Errorf("%w: Responder ORD %d, Initiator IRD %d", ErrInsufficientIRD, repORD, n.IRD)
			n.IRD, n.ORD = repORD, repIRD
			return err
		}
		n.IRD = repORD // no more than the Responder will use
	}
	n.ORD = min(n.ORD, repIRD)
	if !local.PeerToPeer || !rep.PeerToPeer {
		return nil // client-server model: the ULP sends the first FPDU
	}
	n.PeerToPeer = true
	if n.RTR = pickRTR(rep.RTR & local.rtr()); n.RTR == 0 {
		return fmt.Errorf("%w: Initiator offered %v, Responder chose %v", ErrNoMatchingRTR, local.rtr(), rep.RTR)
	}
	return nil
}

// pickRTR chooses one RTR type of set: Write, then Read, then Send.
func pickRTR(set RTR) RTR {
	for _, t := range [...]RTR{RTRWrite, RTRRead, RTRSend} {
		if set&t != 0 {
			return t
		}
	}
	return 0
}

// clampIRDORD maps every value from IRDORDUnspecified up to
// IRDORDUnspecified. Being the largest IRD/ORD value, IRDORDUnspecified
// ("no limit stated") then drops out of min by itself.
func clampIRDORD(v uint16) uint16 { return min(v, IRDORDUnspecified) }
