// Package login implements the iSCSI Login Phase (RFC 7143 sections 6,
// 11.12, 11.13, 12 and 13) with the iSER keys of RFC 7145 section 6, as two
// pure state machines: Target (the target role) and Initiator (the
// initiator role). Neither touches a socket, starts a goroutine or reads a
// clock: the session runtime feeds each Login PDU it receives (the iSCSI PDU
// carried in an iSER Send, without the iSER header) to Step and sends the
// PDU that Step appends.
//
// A login proceeds through the stages of section 6.3: SecurityNegotiation
// (CSG 0, CHAP of section 12.1.3 or none), LoginOperationalNegotiation
// (CSG 1, the keys of section 13 and RFC 7145 section 6) and
// FullFeaturePhase (3). Text may span several PDUs with the C bit (section
// 6.1, the "logical text data segment", LTDS); both roles accept that and
// answer each partial PDU with an empty one.
//
// Negotiation follows section 6.2: list keys take the first value the
// acceptor supports, Boolean keys the AND or OR of both values, numerical
// keys the minimum or maximum, declarative keys are recorded. Unknown keys
// are answered NotUnderstood; keys made irrelevant by the session type or by
// RDMAExtensions are answered Irrelevant. Malformed or out-of-range values
// fail the login; a target reports every failure as a *StatusError with the
// Status-Class and Status-Detail of section 11.13.5 and a reason naming the
// key and value, an initiator reports a target's failure status the same way
// and a target that breaks the protocol as a *ProtocolError.
//
// This implementation is iSER-only: a Normal session must negotiate
// RDMAExtensions=Yes (RFC 7145 section 5.1), so HeaderDigest and DataDigest
// are None and markers are off (RFC 7145 sections 6.1 and 6.6). Discovery
// sessions do not negotiate RDMAExtensions (RFC 7145 section 5.1) and use
// MaxRecvDataSegmentLength; SendTargets text (RFC 7143 appendix C) is built
// and parsed by AppendSendTargets and ParseSendTargets.
//
// Section numbers in comments are RFC 7143's unless stated otherwise.
package login
