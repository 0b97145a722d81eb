package mpa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Startup frame layout (RFC 5044 section 7.1.1, Figure 8; RFC 6581 for
// revision 2).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Key (16 octets: "MPA ID Req Frame" or "MPA ID Rep Frame")    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|M|C|R|E| Res   |     Rev       |          PD_Length            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|B|          IRD              |C|D|          ORD              |  Rev 2 only:
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+  first 4 octets
//	~          Private Data (0 to 512 octets in all, PD_Length)     ~  of Private Data
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// E is the "enhanced" bit that the Linux iWARP providers (siw, cxgb4,
// i40iw/irdma) set in every revision-2 frame; see FlagEnhanced.
const (
	// StartupKeyLen is the size of the Key field.
	StartupKeyLen = 16
	// StartupHeaderLen is the size of the fixed part of an MPA Request or
	// Reply: Key, the flags octet, Rev and PD_Length. A stream reader reads
	// this much, learns PD_Length from ParseStartupHeader, then reads the
	// Private Data.
	StartupHeaderLen = StartupKeyLen + 4
	// MaxPrivateData is the largest PD_Length RFC 5044 7.1.1 allows: "The
	// Private Data field MUST be between 0 and 512 octets in length."
	// (Linux siw accepts at most 256 octets, IRD/ORD word included.)
	MaxPrivateData = 512
	// IRDORDLen is the size of the RFC 6581 IRD/ORD word that opens the
	// Private Data of a revision-2 frame.
	IRDORDLen = 4
	// MaxStartupFrame is the largest valid Startup frame.
	MaxStartupFrame = StartupHeaderLen + MaxPrivateData
)

// The two values of the Key field (RFC 5044 7.1.1).
const (
	// KeyRequest is the Key an Initiator sends in its MPA Request Frame.
	KeyRequest = "MPA ID Req Frame"
	// KeyReply is the Key a Responder sends in its MPA Reply Frame.
	KeyReply = "MPA ID Rep Frame"
)

// Bits of the flags octet (octet 16) of a Startup frame.
const (
	// FlagM is the Marker bit M: Markers are REQUIRED in the FPDUs that the
	// peer of the frame's sender sends (RFC 5044 7.1.1).
	FlagM = 0x80
	// FlagC is the CRC bit C: the sender's preference for CRCs (7.1.1, 4.4).
	FlagC = 0x40
	// FlagR is the Rejected Connection bit R of a Reply. In a Request it is
	// "set to zero, and not checked on reception" (7.1.1).
	FlagR = 0x20
	// FlagEnhanced (0x10) is the bit Linux calls MPA_RR_FLAG_ENHANCED (siw),
	// MPA_ENHANCED_RDMA_CONN (cxgb4) and IETF_MPA_V2_FLAG (i40iw, irdma).
	// RFC 5044 counts it as part of Res; these providers set it in every
	// revision-2 frame, and siw resets a revision-2 connection whose Reply
	// lacks it, so frames built by this package set it with Rev 2. It is
	// never required on receipt: a revision-2 frame always carries the
	// IRD/ORD word.
	FlagEnhanced = 0x10
	// FlagRes masks the remaining reserved bits: "It MUST be set to zero
	// when sending, and not checked on reception" (7.1.1).
	FlagRes = 0x0f
)

// MPA revisions (the Rev field).
const (
	// Rev1 is RFC 5044 MPA.
	Rev1 = 1
	// Rev2 is MPA with the enhanced connection establishment of RFC 6581:
	// the first four octets of Private Data are the IRD/ORD word.
	Rev2 = 2
)

// StartupKind tells an MPA Request Frame from an MPA Reply Frame, by Key.
type StartupKind uint8

const (
	// AnyKind, as the expected kind, accepts either Key (for traces and
	// tests; an endpoint always knows which frame it waits for).
	AnyKind StartupKind = iota
	// Request is the MPA Request Frame an Initiator sends.
	Request
	// Reply is the MPA Reply Frame a Responder sends.
	Reply
)

func (k StartupKind) String() string {
	switch k {
	case AnyKind:
		return "any"
	case Request:
		return "MPA Request"
	case Reply:
		return "MPA Reply"
	}
	return fmt.Sprintf("StartupKind(%d)", uint8(k))
}

// Errors of a received Startup frame. Each is an invalid MPA Request or
// Reply (RFC 5044 section 8, code 4): "the TCP connection MUST be
// immediately closed". Errors returned by this package wrap them with detail.
var (
	// ErrStartupKey: the Key is neither "MPA ID Req Frame" nor "MPA ID Rep
	// Frame": the peer is not an MPA endpoint, or did not start MPA at the
	// same octet of the stream (7.1.2 rule 5).
	ErrStartupKey = &Error{CodeStartup, "Key is not an MPA Request or Reply key"}
	// ErrInitiatorInitiator: an MPA Request arrived where a Reply was
	// expected, so both ends started as Initiator (7.1.2 rule 8: "MPA
	// implementations MUST use the difference between the MPA Request Frame
	// and the MPA Reply Frame to check for incorrect Initiator/Initiator
	// startups").
	ErrInitiatorInitiator = &Error{CodeStartup, "MPA Request received where a Reply was expected (Initiator/Initiator startup)"}
	// ErrUnexpectedReply: an MPA Reply arrived where a Request was expected;
	// the peer does not act as Initiator (7.1.2 rules 2, 8).
	ErrUnexpectedReply = &Error{CodeStartup, "MPA Reply received where a Request was expected"}
	// ErrStartupRevision: Rev is neither 1 (RFC 5044) nor 2 (RFC 6581). "If
	// the MPA receiver cannot interoperate with the received version, then
	// it MUST close the connection and report an error locally" (7.1.1).
	ErrStartupRevision = &Error{CodeStartup, "unsupported MPA revision"}
	// ErrPDLength: PD_Length exceeds 512 (7.1.1, 7.1.2 rule 9).
	ErrPDLength = &Error{CodeStartup, "PD_Length exceeds 512"}
	// ErrPDLimit: PD_Length exceeds the receiver's Private Data buffer
	// (7.1.2 rule 9: "The buffer that receives the Private Data field MUST
	// be large enough to receive that data").
	ErrPDLimit = &Error{CodeStartup, "PD_Length exceeds the Private Data buffer"}
	// ErrStartupTruncated: fewer octets than the 20-octet fixed part, or a
	// Private Data field shorter than PD_Length (7.1.1: "If the receiver
	// detects that the PD_Length field does not match the length of the
	// Private Data field ... the receiver MUST close the connection").
	ErrStartupTruncated = &Error{CodeStartup, "Startup frame shorter than its PD_Length"}
	// ErrNoIRDORD: a revision-2 frame whose PD_Length is less than 4, so it
	// cannot hold the RFC 6581 IRD/ORD word.
	ErrNoIRDORD = &Error{CodeStartup, "revision 2 frame without the IRD/ORD word (PD_Length < 4)"}
)

// ErrStartupEncode is returned (wrapped, with detail) when a Startup value
// cannot be encoded: an unknown Kind or revision, IRD or ORD above 0x3fff,
// reserved bits outside FlagRes, or more than 512 octets of Private Data.
var ErrStartupEncode = errors.New("mpa: Startup frame cannot be encoded")

// RTR is a set of ready-to-receive message types of RFC 6581: the first
// FPDU that an Initiator sends in the peer-to-peer model so that the
// Responder, which may send nothing before it has received an FPDU (RFC 5044
// 7.1.2 rule 4), can start.
type RTR uint8

const (
	// RTRSend is flag B: a zero-length Send (FULPDU) as RTR. It consumes a
	// Receive that the Responder must have posted.
	RTRSend RTR = 1 << iota
	// RTRWrite is flag C: a zero-length RDMA Write as RTR.
	RTRWrite
	// RTRRead is flag D: a zero-length RDMA Read Request as RTR. It uses one
	// of the Initiator's ORD and one of the Responder's IRD.
	RTRRead

	// AllRTR is every RTR type.
	AllRTR = RTRSend | RTRWrite | RTRRead
)

func (r RTR) String() string {
	if r == 0 {
		return "none"
	}
	s := ""
	for _, t := range [...]struct {
		bit  RTR
		name string
	}{{RTRSend, "Send"}, {RTRWrite, "Write"}, {RTRRead, "Read"}} {
		if r&t.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += t.name
		}
	}
	if r&^AllRTR != 0 {
		s += fmt.Sprintf("|%#x", uint8(r&^AllRTR))
	}
	return s
}

// IRDORD bits (RFC 6581): the first 16-bit word holds A, B and IRD, the
// second C, D and ORD, both in network byte order.
const (
	// IRDORDMask masks the 14-bit IRD and ORD fields; it is also the largest
	// value they hold.
	IRDORDMask = 0x3fff
	// IRDORDUnspecified (0x3fff, all ones) is read by this package as "no
	// value": Intel's providers (nes, i40iw, irdma: IETF_NO_IRD_ORD) send it
	// when they do not negotiate IRD/ORD, and skip negotiation on receiving
	// it. See Negotiate.
	IRDORDUnspecified = IRDORDMask

	irdordA = 0x8000 // word 0: peer-to-peer connection model
	irdordB = 0x4000 // word 0: zero-length Send RTR
	irdordC = 0x8000 // word 1: zero-length RDMA Write RTR
	irdordD = 0x4000 // word 1: zero-length RDMA Read RTR
)

// IRDORD is the RFC 6581 IRD/ORD word, the first four octets of the Private
// Data of a revision-2 MPA Request or Reply; the ULP never sees them.
type IRDORD struct {
	// IRD is the sender's Inbound RDMA Read Queue Depth: how many RDMA Read
	// Requests it accepts outstanding (14 bits).
	IRD uint16
	// ORD is the sender's Outbound RDMA Read Queue Depth: how many RDMA Read
	// Requests it means to have outstanding (14 bits).
	ORD uint16
	// PeerToPeer is flag A: the peer-to-peer connection model, in which the
	// Initiator sends an RTR message as its first FPDU.
	PeerToPeer bool
	// RTR holds flags B, C and D: in a Request the RTR types the Initiator
	// can send, in a Reply the one the Responder chose.
	RTR RTR
}

// ParseIRDORD reads the IRD/ORD word from the first four octets of b. It
// returns the zero value when b is shorter.
func ParseIRDORD(b []byte) IRDORD {
	if len(b) < IRDORDLen {
		return IRDORD{}
	}
	w0 := binary.BigEndian.Uint16(b[0:2])
	w1 := binary.BigEndian.Uint16(b[2:4])
	v := IRDORD{IRD: w0 & IRDORDMask, ORD: w1 & IRDORDMask, PeerToPeer: w0&irdordA != 0}
	if w0&irdordB != 0 {
		v.RTR |= RTRSend
	}
	if w1&irdordC != 0 {
		v.RTR |= RTRWrite
	}
	if w1&irdordD != 0 {
		v.RTR |= RTRRead
	}
	return v
}

// Put writes the word into b[0:4]. IRD and ORD are masked to 14 bits; RTR
// bits other than B, C and D are dropped. It does nothing when b is shorter.
func (v IRDORD) Put(b []byte) {
	if len(b) < IRDORDLen {
		return
	}
	w0 := v.IRD & IRDORDMask
	w1 := v.ORD & IRDORDMask
	if v.PeerToPeer {
		w0 |= irdordA
	}
	if v.RTR&RTRSend != 0 {
		w0 |= irdordB
	}
	if v.RTR&RTRWrite != 0 {
		w1 |= irdordC
	}
	if v.RTR&RTRRead != 0 {
		w1 |= irdordD
	}
	binary.BigEndian.PutUint16(b[0:2], w0)
	binary.BigEndian.PutUint16(b[2:4], w1)
}

// StartupFrame is a received MPA Request or Reply in wire form, as returned
// by ParseStartup: exactly StartupHeaderLen+PD_Length octets, valid. Its
// accessors read the octets in place; slices they return alias it.
type StartupFrame []byte

// Kind is Request or Reply according to the Key.
func (s StartupFrame) Kind() StartupKind { return keyKind(s) }

// Key is the 16-octet Key field.
func (s StartupFrame) Key() []byte { return s[:StartupKeyLen] }

// M is the Marker bit: Markers are REQUIRED in FPDUs sent to this frame's
// sender (RFC 5044 7.1.1).
func (s StartupFrame) M() bool { return s[16]&FlagM != 0 }

// C is the sender's CRC preference bit.
func (s StartupFrame) C() bool { return s[16]&FlagC != 0 }

// R is the Rejected Connection bit as received. It has a meaning only in a
// Reply; see Rejected.
func (s StartupFrame) R() bool { return s[16]&FlagR != 0 }

// Rejected reports a Reply whose R bit rejects the connection. R is "not
// checked on reception in the MPA Request Frame" (7.1.1), so it is false for
// a Request whatever the bit.
func (s StartupFrame) Rejected() bool { return s.Kind() == Reply && s.R() }

// Enhanced reports bit 0x10 (FlagEnhanced).
func (s StartupFrame) Enhanced() bool { return s[16]&FlagEnhanced != 0 }

// Res is the reserved bits (FlagRes) as received; they are not checked.
func (s StartupFrame) Res() uint8 { return s[16] & FlagRes }

// Rev is the MPA revision, 1 or 2.
func (s StartupFrame) Rev() uint8 { return s[17] }

// PDLength is the PD_Length field: all Private Data octets, the IRD/ORD word
// of a revision-2 frame included.
func (s StartupFrame) PDLength() int { return int(binary.BigEndian.Uint16(s[18:20])) }

// IRDORD is the RFC 6581 IRD/ORD word of a revision-2 frame; the zero value
// for revision 1.
func (s StartupFrame) IRDORD() IRDORD {
	if s.Rev() != Rev2 {
		return IRDORD{}
	}
	return ParseIRDORD(s[StartupHeaderLen:])
}

// PrivateData is the ULP's Private Data: the whole Private Data field in
// revision 1, what follows the IRD/ORD word in revision 2. It aliases s.
func (s StartupFrame) PrivateData() []byte {
	if s.Rev() == Rev2 {
		return s[StartupHeaderLen+IRDORDLen:]
	}
	return s[StartupHeaderLen:]
}

// Startup returns the frame's fields; its PrivateData aliases s.
func (s StartupFrame) Startup() Startup {
	f := s[16]
	return Startup{
		Kind:        s.Kind(),
		M:           f&FlagM != 0,
		C:           f&FlagC != 0,
		R:           f&FlagR != 0,
		Enhanced:    f&FlagEnhanced != 0,
		Res:         f & FlagRes,
		Rev:         s.Rev(),
		IRDORD:      s.IRDORD(),
		PrivateData: s.PrivateData(),
	}
}

// keyKind returns the kind of the Key at the start of b (at least 16
// octets), or AnyKind when it is neither key.
func keyKind(b []byte) StartupKind {
	switch string(b[:StartupKeyLen]) { // no allocation: compared in place
	case KeyRequest:
		return Request
	case KeyReply:
		return Reply
	}
	return AnyKind
}

// ParseStartupHeader validates the fixed 20-octet part of a Startup frame at
// the start of b and returns PD_Length: how many octets of Private Data
// follow, which a stream reader reads next before calling ParseStartup.
//
// expect is the frame the caller waits for: Reply for an Initiator, Request
// for a Responder (AnyKind accepts both). limit is the size of the caller's
// Private Data buffer (RFC 5044 7.1.2 rule 9); PD_Length is checked against
// both limit and 512. It checks, in this order: length (ErrStartupTruncated),
// Key (ErrStartupKey, ErrInitiatorInitiator, ErrUnexpectedReply), Rev
// (ErrStartupRevision), PD_Length (ErrPDLength, ErrPDLimit) and, for
// revision 2, room for the IRD/ORD word (ErrNoIRDORD). Res, R in a Request
// and FlagEnhanced are not checked.
func ParseStartupHeader(b []byte, expect StartupKind, limit int) (pdLength int, err error) {
	if len(b) < StartupHeaderLen {
		return 0, fmt.Errorf("%w: %d of %d octets of the fixed part", ErrStartupTruncated, len(b), StartupHeaderLen)
	}
	switch got := keyKind(b); {
	case got == AnyKind:
		return 0, fmt.Errorf("%w: % x", ErrStartupKey, b[:StartupKeyLen])
	case expect == Reply && got == Request:
		return 0, ErrInitiatorInitiator
	case expect == Request && got == Reply:
		return 0, ErrUnexpectedReply
	}
	rev := b[17]
	if rev != Rev1 && rev != Rev2 {
		return 0, fmt.Errorf("%w: Rev %d", ErrStartupRevision, rev)
	}
	n := int(binary.BigEndian.Uint16(b[18:20]))
	if n > MaxPrivateData {
		return 0, fmt.Errorf("%w: PD_Length %d", ErrPDLength, n)
	}
	if limit < 0 {
		limit = 0
	}
	if n > limit {
		return 0, fmt.Errorf("%w: PD_Length %d, buffer %d", ErrPDLimit, n, limit)
	}
	if rev == Rev2 && n < IRDORDLen {
		return 0, fmt.Errorf("%w: PD_Length %d", ErrNoIRDORD, n)
	}
	return n, nil
}

// ParseStartup validates the Startup frame at the start of b, as
// ParseStartupHeader does, and returns it: b[:StartupHeaderLen+PD_Length],
// without copying. Octets of b past the frame are not looked at (they belong
// to the stream). When b holds fewer than PD_Length octets of Private Data
// the error is ErrStartupTruncated. It does not allocate unless it fails.
func ParseStartup(b []byte, expect StartupKind, limit int) (StartupFrame, error) {
	n, err := ParseStartupHeader(b, expect, limit)
	if err != nil {
		return nil, err
	}
	if end := StartupHeaderLen + n; len(b) < end {
		return nil, fmt.Errorf("%w: %d of %d octets of Private Data", ErrStartupTruncated, len(b)-StartupHeaderLen, n)
	}
	return StartupFrame(b[:StartupHeaderLen+n]), nil
}

// Startup holds the fields of an MPA Request or Reply (RFC 5044 7.1.1, RFC
// 6581). The zero value is not a valid frame; StartupConfig.Request and
// Negotiated.Reply build the frames an endpoint sends.
type Startup struct {
	// Kind is Request or Reply: the Key.
	Kind StartupKind
	// M: Markers are REQUIRED in FPDUs that the receiver of this frame
	// sends.
	M bool
	// C: the sender's preference for CRCs.
	C bool
	// R: in a Reply, the Responder's ULP rejects the connection. In a
	// Request it is zero when sent and ignored when received; it is kept
	// here as received so that a parsed frame encodes back to the same
	// octets.
	R bool
	// Enhanced is bit 0x10 (FlagEnhanced). Frames this package builds set it
	// exactly when Rev is 2.
	Enhanced bool
	// Res is the reserved bits (FlagRes) as received. RFC 5044: "It MUST be
	// set to zero when sending". It exists so that a parsed frame encodes
	// back to the same octets; frames this package builds leave it zero.
	Res uint8
	// Rev is the MPA revision: Rev1 or Rev2.
	Rev uint8
	// IRDORD is the RFC 6581 word that opens the Private Data when Rev is
	// 2; it is ignored for revision 1.
	IRDORD IRDORD
	// PrivateData is the ULP's Private Data, without the IRD/ORD word. With
	// it, a revision-1 frame holds at most 512 octets, a revision-2 frame
	// 508.
	PrivateData []byte
}

// Len is the encoded size: StartupHeaderLen+PD_Length.
func (f *Startup) Len() int {
	n := StartupHeaderLen + len(f.PrivateData)
	if f.Rev == Rev2 {
		n += IRDORDLen
	}
	return n
}

// PDLength is the PD_Length the frame is encoded with.
func (f *Startup) PDLength() int { return f.Len() - StartupHeaderLen }

func (f *Startup) check() error {
	if f.Kind != Request && f.Kind != Reply {
		return fmt.Errorf("%w: Kind %v", ErrStartupEncode, f.Kind)
	}
	if f.Rev != Rev1 && f.Rev != Rev2 {
		return fmt.Errorf("%w: Rev %d", ErrStartupEncode, f.Rev)
	}
	if f.Res&^FlagRes != 0 {
		return fmt.Errorf("%w: Res %#x", ErrStartupEncode, f.Res)
	}
	if n := f.PDLength(); n > MaxPrivateData {
		return fmt.Errorf("%w: PD_Length %d exceeds %d", ErrStartupEncode, n, MaxPrivateData)
	}
	if f.Rev == Rev2 && (f.IRDORD.IRD > IRDORDMask || f.IRDORD.ORD > IRDORDMask || f.IRDORD.RTR&^AllRTR != 0) {
		return fmt.Errorf("%w: IRD %d ORD %d RTR %v", ErrStartupEncode, f.IRDORD.IRD, f.IRDORD.ORD, f.IRDORD.RTR)
	}
	return nil
}

// Encode writes the frame into b[:f.Len()] and returns f.Len(). It fails
// with io.ErrShortBuffer when b is too small, and with ErrStartupEncode when
// a field cannot be encoded. It does not allocate unless it fails.
func (f *Startup) Encode(b []byte) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	n := f.Len()
	if len(b) < n {
		return 0, fmt.Errorf("mpa: encoding a %d-octet Startup frame into %d octets: %w", n, len(b), io.ErrShortBuffer)
	}
	if f.Kind == Request {
		copy(b, KeyRequest)
	} else {
		copy(b, KeyReply)
	}
	flags := f.Res
	if f.M {
		flags |= FlagM
	}
	if f.C {
		flags |= FlagC
	}
	if f.R {
		flags |= FlagR
	}
	if f.Enhanced {
		flags |= FlagEnhanced
	}
	b[16] = flags
	b[17] = f.Rev
	binary.BigEndian.PutUint16(b[18:20], uint16(n-StartupHeaderLen))
	pd := b[StartupHeaderLen:n]
	if f.Rev == Rev2 {
		f.IRDORD.Put(pd)
		pd = pd[IRDORDLen:]
	}
	copy(pd, f.PrivateData)
	return n, nil
}

// Append appends the encoded frame to b.
func (f *Startup) Append(b []byte) ([]byte, error) {
	if err := f.check(); err != nil {
		return b, err
	}
	start := len(b)
	b = slices.Grow(b, f.Len())[:start+f.Len()]
	if _, err := f.Encode(b[start:]); err != nil {
		return b[:start], err
	}
	return b, nil
}
