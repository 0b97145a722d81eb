// Package login implements the iSCSI Login Phase (RFC 7143 sections 6,
// 11.12, 11.13, 12 and 13) with the iSER keys of RFC 7145 section 6, as two
// pure state machines: Target (the target role) and Initiator (the
// initiator role). Neither touches a socket, starts a goroutine or reads a
// clock: the session runtime feeds each Login PDU it receives (the iSCSI PDU
// carried in an iSER Send without the iSER header, or read from the TCP
// stream) to Step and sends the PDU that Step appends.
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
// # Two transports
//
// A login runs on one of two kinds of connection, which the configuration
// names (TargetConfig.Traditional, InitiatorConfig.Traditional):
//
//   - iSER (the default): a Normal session must negotiate
//     RDMAExtensions=Yes, iSER-assisted mode (RFC 7145 sections 5.1 and
//     6.3). The initiator proposes it in its first operational request, the
//     target offers it if the initiator did not, and either side fails the
//     login on No. HeaderDigest and DataDigest are None and markers off
//     (RFC 7145 sections 6.1 and 6.6); MaxRecvDataSegmentLength is ignored
//     and derived from TargetRecvDataSegmentLength and
//     InitiatorRecvDataSegmentLength (RFC 7145 sections 6.2, 6.4, 6.5).
//   - Traditional iSCSI over TCP (RFC 7143): RDMAExtensions is never Yes.
//     The initiator does not propose it and answers No if a target offers
//     it; the target does not offer it and answers an initiator's Yes with
//     No, so an iSER initiator that can fall back goes on in traditional
//     mode (RFC 7145 section 6.3: a node that does not support iSER here
//     answers No, and the connection stays in Traditional iSCSI mode,
//     section 5.1). The iSER keys (TargetRecvDataSegmentLength,
//     InitiatorRecvDataSegmentLength, MaxOutstandingUnexpectedPDUs,
//     MaxAHSLength, TaggedBufferForSolicitedDataOnly, iSERHelloRequired)
//     are Irrelevant when RDMAExtensions=No: proposals of them are answered
//     Irrelevant, declarations ignored, and neither role sends them. Both
//     roles declare MaxRecvDataSegmentLength (section 13.12). HeaderDigest
//     and DataDigest (section 13.1) are negotiated from the Offer
//     (Params.HeaderDigest, Params.DataDigest): "CRC32C,None" or "None" is
//     proposed, the acceptor takes the first value of the list it supports,
//     and the Result says whether CRC32C was chosen. Login PDUs themselves
//     carry no digests; the runtime applies the chosen ones from the Full
//     Feature Phase on.
//
// An iSER-only node and a traditional one do not agree: a traditional
// initiator at an iSER-only target is refused with Initiator error
// ("RDMAExtensions=No: this target serves iSER-assisted mode only"), and
// an iSER Initiator of this package ends the login when a traditional
// target answers No.
//
// Discovery sessions do not negotiate RDMAExtensions (RFC 7145 section 5.1)
// on either transport and use MaxRecvDataSegmentLength; on a Traditional
// connection they negotiate the digests too. SendTargets text (RFC 7143
// appendix C) is built and parsed by AppendSendTargets and
// ParseSendTargets.
//
// Section numbers in comments are RFC 7143's unless stated otherwise.
package login
