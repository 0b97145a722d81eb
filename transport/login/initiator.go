package login

import (
	"crypto/rand"
	"fmt"
	"io"
	"strings"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// InitiatorConfig configures the initiator role of a login.
type InitiatorConfig struct {
	// InitiatorName (required) and InitiatorAlias (optional), sections
	// 13.5 and 13.7.
	InitiatorName, InitiatorAlias string
	// TargetName is the target to log in to; required for Normal
	// sessions, usually empty for Discovery (section 13.4).
	TargetName string
	// SessionType is SessionNormal (the default when empty) or
	// SessionDiscovery (section 13.21).
	SessionType string
	// CHAP, when non-nil, are the credentials to authenticate with
	// (AuthMethod=CHAP,None is offered). With MutualUser and MutualSecret
	// set the target must authenticate too, and only AuthMethod=CHAP is
	// offered. nil: the login skips SecurityNegotiation.
	CHAP *CHAP
	// Offer is what this initiator proposes: see Params.
	Offer Params
	// Traditional says the connection is traditional iSCSI over TCP (RFC
	// 7143), not iSER. The initiator then does not propose RDMAExtensions
	// (and answers No if the target proposes it, RFC 7145 section 6.3),
	// proposes no iSER key, declares MaxRecvDataSegmentLength and proposes
	// HeaderDigest and DataDigest from the Offer (section 13.1). false:
	// iSER, a Normal session must negotiate RDMAExtensions=Yes (RFC 7145
	// section 5.1).
	Traditional bool
	// ISID is the 48-bit Initiator Session ID (section 11.12.5).
	ISID uint64
	// TSIH is 0 for a new session (the leading login), or the TSIH of the
	// session this connection joins (section 11.12.6); then no leading-only
	// key is negotiated and, unless Traditional, iSER-assisted mode is
	// implied (RFC 7145 section 5.1).
	TSIH uint16
	// CmdSN is carried by every Login Request; the first non-immediate
	// command of the Full Feature Phase carries it too (section 11.12.8).
	CmdSN uint32
	// Rand is the source of the challenges of mutual CHAP; nil means
	// crypto/rand.Reader.
	Rand io.Reader
	// ITT is the Initiator Task Tag of the Login Phase, one task (section
	// 6.3); any value but 0xffffffff.
	ITT uint32
	// CID is the connection ID (section 11.12.7).
	CID uint16
	// ExpStatSN is the ExpStatSN of the first Login Request, meaningful
	// only when the login restarts a connection (section 11.12.9).
	ExpStatSN uint32
}

// Validate checks the configuration; the error wraps ErrConfig and names
// the offending field.
func (c *InitiatorConfig) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil InitiatorConfig", ErrConfig)
	}
	if err := checkName(c.InitiatorName); err != nil {
		return fmt.Errorf("%w: InitiatorName %s: %v", ErrConfig, quote(c.InitiatorName), err)
	}
	if err := checkLocalName(c.InitiatorAlias); err != nil || len(c.InitiatorAlias) > iscsi.MaxValueLen || strings.IndexByte(c.InitiatorAlias, 0) >= 0 {
		return fmt.Errorf("%w: InitiatorAlias %s is not an iSCSI-local-name-value of at most 255 octets", ErrConfig, quote(c.InitiatorAlias))
	}
	switch c.SessionType {
	case "", SessionNormal:
		if c.TargetName == "" {
			return fmt.Errorf("%w: a Normal session needs a TargetName (section 13.4)", ErrConfig)
		}
	case SessionDiscovery:
	default:
		return fmt.Errorf("%w: SessionType %s is neither Normal nor Discovery", ErrConfig, quote(c.SessionType))
	}
	if c.TargetName != "" {
		if err := checkName(c.TargetName); err != nil {
			return fmt.Errorf("%w: TargetName %s: %v", ErrConfig, quote(c.TargetName), err)
		}
	}
	if c.CHAP != nil {
		if err := c.CHAP.validate("initiator"); err != nil {
			return err
		}
	}
	if c.ISID>>48 != 0 {
		return fmt.Errorf("%w: ISID 0x%x does not fit in 48 bits", ErrConfig, c.ISID)
	}
	if c.ITT == iscsi.ReservedITT {
		return fmt.Errorf("%w: ITT 0xffffffff is reserved (section 11.2.1.8)", ErrConfig)
	}
	return c.Offer.Validate()
}

// Initiator is the initiator role of one connection's Login Phase. Create
// it with NewInitiator, send what Start appends, then feed every Login
// Response to Step and send what it appends, until Step reports done. It
// is not safe for concurrent use.
type Initiator struct {
	cfg    *InitiatorConfig
	cfgErr error
	rand   io.Reader
	state  loginState
	stage  uint8

	reqTransit bool  // T of the last request
	reqNSG     uint8 // NSG of the last request
	expStatSN  uint32
	exchanges  int
	text       []byte // text of Login Responses with the C bit, not yet complete

	discovery   bool
	neg         *negotiator
	auth        authMethod
	offeredNone bool
	chap        chapInitiator
	targetAlias string
	tpgt        uint16
	result      Result
}

// NewInitiator returns the initiator side of a login on one connection.
// With an invalid cfg (see InitiatorConfig.Validate) Start appends nothing
// and Step returns the configuration error.
func NewInitiator(cfg *InitiatorConfig) *Initiator {
	i := &Initiator{cfg: cfg, cfgErr: cfg.Validate()}
	if i.cfgErr != nil {
		return i
	}
	i.rand = cfg.Rand
	if i.rand == nil {
		i.rand = rand.Reader
	}
	i.discovery = cfg.SessionType == SessionDiscovery
	i.expStatSN = cfg.ExpStatSN
	i.neg = newNegotiator(roleInitiator, cfg.Offer, i.discovery, cfg.TSIH == 0, cfg.Traditional)
	return i
}

// Result is the outcome of the login; valid once Step reported done with a
// nil error.
func (i *Initiator) Result() Result { return i.result }

// Start appends the first Login Request PDU to dst. Without CHAP it opens
// LoginOperationalNegotiation (CSG=1, T=1, NSG=3) with the names and all
// operational proposals; with CHAP it opens SecurityNegotiation (CSG=0,
// T=1, NSG=1) with the names and AuthMethod. It appends nothing when the
// configuration is invalid or the login already started.
func (i *Initiator) Start(dst []byte) []byte {
	if i.state != stateStart || i.cfgErr != nil {
		return dst
	}
	names := i.names()
	var out []byte
	var err error
	if i.cfg.CHAP == nil {
		i.stage, i.auth = StageOperational, authNone
		out, err = i.request(dst, append(names, i.proposals()...), true, StageFullFeature)
	} else {
		i.stage = StageSecurity
		methods := "CHAP,None"
		if i.cfg.CHAP.mutual() {
			methods = "CHAP" // the target must authenticate: no None
		} else {
			i.offeredNone = true
		}
		i.neg.markSent(kAuthMethod, methods)
		out, err = i.request(dst, append(names, pair{"AuthMethod", methods}), true, StageOperational)
	}
	if err != nil {
		i.cfgErr = err
		return dst
	}
	i.state = stateLogin
	return out
}

// names are the keys of the first Login Request (section 6.3): InitiatorName,
// InitiatorAlias, TargetName and SessionType.
func (i *Initiator) names() []pair {
	p := []pair{{"InitiatorName", i.cfg.InitiatorName}}
	if i.cfg.InitiatorAlias != "" {
		p = append(p, pair{"InitiatorAlias", i.cfg.InitiatorAlias})
	}
	if i.cfg.TargetName != "" {
		p = append(p, pair{"TargetName", i.cfg.TargetName})
	}
	stype := SessionNormal
	if i.discovery {
		stype = SessionDiscovery
	}
	p = append(p, pair{"SessionType", stype})
	for _, k := range p {
		i.neg.markSent(lookupKey(k.key), k.value)
	}
	return p
}

// proposals are the initiator's operational keys, all sent in its first
// LoginOperationalNegotiation request: on an iSER connection
// RDMAExtensions=Yes first (RFC 7145 section 6.3 requires it there), the
// digests None (iSER has none, RFC 7145 section 6.1), then the Offer; on a
// Traditional connection the digests of the Offer, the Offer and
// MaxRecvDataSegmentLength (section 13.12).
func (i *Initiator) proposals() []pair {
	n := i.neg
	if i.discovery {
		return n.propose(kHeaderDigest, kDataDigest, kMaxRecvDataSegmentLength)
	}
	if n.traditional {
		if !n.leading {
			return n.propose(kHeaderDigest, kDataDigest, kMaxRecvDataSegmentLength)
		}
		return n.propose(kHeaderDigest, kDataDigest, kInitialR2T, kImmediateData,
			kMaxBurstLength, kFirstBurstLength, kMaxConnections, kMaxOutstandingR2T,
			kDefaultTime2Wait, kDefaultTime2Retain, kDataPDUInOrder, kDataSequenceInOrder,
			kErrorRecoveryLevel, kMaxRecvDataSegmentLength)
	}
	if !n.leading {
		return n.propose(kHeaderDigest, kDataDigest, kTargetRecvDataSegmentLength, kInitiatorRecvDataSegmentLength)
	}
	keys := []int{kRDMAExtensions, kHeaderDigest, kDataDigest, kInitialR2T, kImmediateData,
		kMaxBurstLength, kFirstBurstLength, kMaxConnections, kMaxOutstandingR2T,
		kDefaultTime2Wait, kDefaultTime2Retain, kDataPDUInOrder, kDataSequenceInOrder,
		kErrorRecoveryLevel, kTargetRecvDataSegmentLength, kInitiatorRecvDataSegmentLength,
		kMaxOutstandingUnexpectedPDUs}
	if i.cfg.Offer.ISERHelloRequired {
		keys = append(keys, kISERHelloRequired)
	}
	if i.cfg.Offer.TaggedBufferForSolicitedDataOnly {
		keys = append(keys, kTaggedBufferForSolicitedDataOnly)
	}
	return n.propose(keys...)
}

// Step consumes one Login Response PDU and appends the next Login Request
// to dst (nothing when done). done with a nil error: the Full Feature Phase
// is reached and Result is valid. A failure status from the target comes
// back as a *StatusError (for a redirection, the reason includes the
// TargetAddress); a target that breaks the protocol, or fails mutual CHAP,
// as a *ProtocolError. Either way the caller closes the connection. After
// done, Step appends nothing and returns ErrFinished.
func (i *Initiator) Step(dst, resp []byte) (out []byte, done bool, err error) {
	switch i.state {
	case stateDone, stateFailed:
		return dst, true, ErrFinished
	case stateStart:
		i.state = stateFailed
		if i.cfgErr != nil {
			return dst, true, i.cfgErr
		}
		return dst, true, fmt.Errorf("%w: Step called before Start", ErrConfig)
	}
	out, done, err = i.step(dst, resp)
	switch {
	case err != nil:
		i.state = stateFailed
		return dst, true, err
	case done:
		i.state = stateDone
	}
	return out, done, nil
}

func (i *Initiator) step(dst, resp []byte) ([]byte, bool, error) {
	if i.exchanges++; i.exchanges > maxExchanges {
		return nil, false, protoErr("more than %d Login Responses in one Login Phase", maxExchanges)
	}
	if len(resp) < iscsi.BHSLen {
		return nil, false, protoErr("a PDU of %d octets is shorter than the 48-octet BHS", len(resp))
	}
	bhs := iscsi.BHS(resp[:iscsi.BHSLen])
	if bhs.Opcode() != iscsi.OpLoginResp {
		return nil, false, protoErr("%v (opcode 0x%02x) instead of a Login Response", bhs.Opcode(), uint8(bhs.Opcode()))
	}
	lr := iscsi.LoginResp{TargetSNs: iscsi.TargetSNs{BHS: bhs}}
	if n := bhs.TotalAHSLength(); n != 0 {
		return nil, false, protoErr("TotalAHSLength=%d: a Login Response has no AHS (section 11.13)", n)
	}
	dsl := int(bhs.DataSegmentLength())
	if dsl > MaxSegment {
		return nil, false, protoErr("DataSegmentLength=%d exceeds the MaxRecvDataSegmentLength of 8192 in force during login (section 6.3)", dsl)
	}
	if len(resp) < iscsi.BHSLen+dsl {
		return nil, false, protoErr("DataSegmentLength=%d but only %d octets follow the BHS", dsl, len(resp)-iscsi.BHSLen)
	}
	if lr.ITT() != i.cfg.ITT {
		return nil, false, protoErr("Initiator Task Tag 0x%08x, not the login's 0x%08x (section 6.3)", lr.ITT(), i.cfg.ITT)
	}
	data := resp[iscsi.BHSLen : iscsi.BHSLen+dsl]
	if class := lr.StatusClass(); class != 0 {
		// The refusal says why, whatever else the response gets wrong:
		// tgt, for one, sends ISID 0 with it.
		return nil, false, failure(lr, data)
	}
	if lr.ISID() != i.cfg.ISID {
		return nil, false, protoErr("ISID 0x%012x, not the login's 0x%012x", lr.ISID(), i.cfg.ISID)
	}
	if v := lr.VersionActive(); v != 0 {
		return nil, false, protoErr("Version-active=%d: only version 0 was offered (section 11.12.4)", v)
	}
	i.expStatSN = lr.StatSN() + 1
	if lr.Continue() {
		if lr.Transit() {
			return nil, false, protoErr("T and C both set: a Login Response with C=1 must have T=0 (section 11.13.7)")
		}
		if len(i.text)+dsl > MaxText {
			return nil, false, protoErr("login text longer than %d octets", MaxText)
		}
		i.text = append(i.text, data...)
		// Section 6.2: a response with C=1 is answered with an empty
		// request, still as ready to move on as the last one.
		out, err := i.request(dst, nil, i.reqTransit, i.reqNSG)
		return out, false, err
	}
	if csg := lr.CSG(); csg != i.stage {
		return nil, false, protoErr("CSG=%d in answer to a request in stage %d (section 6.3)", csg, i.stage)
	}
	transit, nsg := lr.Transit(), lr.NSG()
	if transit {
		if !i.reqTransit {
			return nil, false, protoErr("T=1 in answer to a request with T=0 (section 11.13.6)")
		}
		if nsg == 2 || nsg <= i.stage || nsg > i.reqNSG {
			return nil, false, protoErr("NSG=%d: the target may only select a next stage after %d and not beyond the requested %d (section 6.3)", nsg, i.stage, i.reqNSG)
		}
	}
	ltds := append(i.text, data...)
	i.text = nil
	pairs, err := parsePairs(ltds)
	if err != nil {
		return nil, false, protoErr("%v", err)
	}
	next, err := i.keys(pairs, transit && nsg == StageFullFeature)
	if err != nil {
		return nil, false, err
	}
	if transit {
		if i.stage == StageSecurity {
			if err := i.authComplete(); err != nil {
				return nil, false, err
			}
		}
		i.stage = nsg
		if nsg == StageFullFeature {
			return dst, true, i.finish(lr)
		}
		out, err := i.request(dst, append(next, i.proposals()...), true, StageFullFeature)
		return out, false, err
	}
	if i.stage == StageSecurity {
		out, err := i.request(dst, next, i.authReady(), StageOperational)
		return out, false, err
	}
	out, err := i.request(dst, next, true, StageFullFeature)
	return out, false, err
}

// failure turns a Login Response with a non-zero Status-Class into a
// *StatusError; for a redirection (class 1) the reason carries the
// TargetAddress keys (section 11.13.5).
func failure(lr iscsi.LoginResp, data []byte) *StatusError {
	s := Status(uint16(lr.StatusClass())<<8 | uint16(lr.StatusDetail()))
	e := &StatusError{Class: s.Class(), Detail: s.Detail(), Reason: "the target rejected the login: " + s.String()}
	if s.Class() == 1 {
		it := iscsi.ParseText(data)
		for it.Next() {
			if string(it.Key()) == "TargetAddress" {
				e.Reason += ", TargetAddress=" + quote(string(it.Value()))
			}
		}
	}
	return e
}

// keys processes the keys of one Login Response and returns the keys of
// the next request. final reports a Login Final-Response, which can carry
// no proposal needing an answer (section 6.3).
func (i *Initiator) keys(pairs []pair, final bool) ([]pair, error) {
	targetAddress := func(idx int) bool {
		return idx == kTargetAddress // section 6.3: may be declared repeatedly; only redirections use it
	}
	g, e := i.neg.sortKeys(pairs, i.stage, targetAddress, i.sessionKey)
	if e != nil {
		return nil, protoErr("%s", e.reason)
	}
	var next []pair
	if !final {
		next = g.notUnderstood
	}
	if i.stage == StageSecurity {
		p, err := i.authStep(g.auth)
		return append(next, p...), err
	}
	answers, required, e := i.neg.receive(g.items)
	if e != nil {
		return nil, protoErr("%s", e.reason)
	}
	if final && required != "" {
		return nil, protoErr("the Final-Response proposes %s, which needs an answer the initiator cannot send (section 6.3)", required)
	}
	return append(next, answers...), nil
}

// sessionKey takes a session key of a Login Response: TargetAlias or
// TargetPortalGroupTag, the two a target declares.
func (i *Initiator) sessionKey(idx int, v string) *negError {
	name := keyTable[idx].name
	switch idx {
	case kTargetAlias:
		if err := checkLocalName(v); err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv(name, v), err)
		}
		i.targetAlias = v
	case kTargetPortalGroupTag:
		n, err := keyTable[idx].checkNumber(v)
		if err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv(name, v), err)
		}
		i.tpgt = uint16(n)
	default:
		return nerr(StatusInitiatorError, "%s is declared by the initiator only (section 13)", kv(name, v))
	}
	return nil
}

// authStep follows the target's side of AuthMethod and CHAP (section 12.1).
func (i *Initiator) authStep(keys map[int]string) ([]pair, error) {
	am, hasAM := keys[kAuthMethod]
	delete(keys, kAuthMethod)
	if i.auth == authUnset {
		if !hasAM {
			if len(keys) > 0 {
				return nil, protoErr("%s before the target chose an AuthMethod (section 12.1)", keyTable[firstKey(keys)].name)
			}
			return nil, nil
		}
		switch am {
		case "CHAP":
			i.auth = authCHAP
			i.chap = chapInitiator{cred: i.cfg.CHAP, rand: i.rand}
		case valNone:
			if !i.offeredNone {
				return nil, authErr("AuthMethod=None, but the initiator requires the target to authenticate and offered only CHAP")
			}
			i.auth = authNone
		case valReject:
			return nil, protoErr("the target rejected %s: no common authentication method (section 12.1)", kv("AuthMethod", i.neg.st[kAuthMethod].proposal))
		default:
			return nil, protoErr("%s was not offered (section 6.2.1)", kv("AuthMethod", am))
		}
	}
	if i.auth != authCHAP {
		if len(keys) > 0 {
			return nil, protoErr("%s without AuthMethod=CHAP (section 12.1)", keyTable[firstKey(keys)].name)
		}
		return nil, nil
	}
	return i.chap.step(keys)
}

// authReady reports whether the initiator's part of SecurityNegotiation is
// done, so its next request asks to move on (T=1).
func (i *Initiator) authReady() bool {
	switch i.auth {
	case authNone:
		return true
	case authCHAP:
		return i.chap.state == chapIWantTarget || i.chap.state == chapIDone
	}
	return false
}

// authComplete checks, when the target ends SecurityNegotiation, that
// authentication really happened as required (section 12.1.3).
func (i *Initiator) authComplete() error {
	switch i.auth {
	case authUnset:
		return protoErr("the target ended SecurityNegotiation without answering %s (section 6.2.1)", kv("AuthMethod", i.neg.st[kAuthMethod].proposal))
	case authCHAP:
		switch i.chap.state {
		case chapIWantTarget:
			return authErr("the target ended SecurityNegotiation without answering the initiator's challenge with CHAP_N and CHAP_R (section 12.1.3)")
		case chapIDone:
		default:
			return protoErr("the target ended SecurityNegotiation before CHAP completed (section 12.1.3)")
		}
	}
	return nil
}

// finish checks the Login Final-Response and fills the Result.
func (i *Initiator) finish(lr iscsi.LoginResp) error {
	if o := i.neg.outstanding(); o != "" {
		return protoErr("the target did not answer %s (section 6.2)", o)
	}
	if e := i.neg.finish(); e != nil {
		return protoErr("%s", e.reason)
	}
	if !i.discovery && !i.cfg.Traditional && !i.neg.res.RDMAExtensions {
		return protoErr("the login ended without RDMAExtensions=Yes (RFC 7145 section 5.1)")
	}
	tsih := lr.TSIH()
	switch {
	case i.cfg.TSIH == 0 && tsih == 0:
		return protoErr("TSIH 0 in the Final-Response of a new session (section 11.13.3)")
	case i.cfg.TSIH != 0 && tsih != i.cfg.TSIH:
		return protoErr("TSIH %d in the Final-Response, not the session's %d (section 11.13.3)", tsih, i.cfg.TSIH)
	}
	// Section 11.12.8: for a leading login the target MUST take the
	// login's CmdSN as its ExpCmdSN, and the first non-immediate command
	// of the session carries that CmdSN. tgt 1.0.85's iSER driver counts
	// the (immediate) Login Request as though it took a CmdSN and answers
	// ExpCmdSN one past it, while its session still expects the login's
	// CmdSN first. That acknowledges a CmdSN no command carried, so
	// nothing the initiator holds is lost: the login goes on, and the
	// session's first command carries the login's CmdSN as the section
	// says. Any other ExpCmdSN says the two ends disagree about the
	// session's command numbering, and the login fails.
	if i.cfg.TSIH == 0 && lr.ExpCmdSN() != i.cfg.CmdSN && lr.ExpCmdSN() != i.cfg.CmdSN+1 {
		return protoErr("ExpCmdSN %d in the Final-Response, not the login's CmdSN %d (section 11.12.8)", lr.ExpCmdSN(), i.cfg.CmdSN)
	}
	stype := SessionNormal
	if i.discovery {
		stype = SessionDiscovery
	}
	i.result = Result{
		SessionType:    stype,
		InitiatorName:  i.cfg.InitiatorName,
		InitiatorAlias: i.cfg.InitiatorAlias,
		TargetName:     i.cfg.TargetName,
		TargetAlias:    i.targetAlias,
		ISID:           i.cfg.ISID,
		TSIH:           tsih,
		CID:            i.cfg.CID,
		TPGT:           i.tpgt,
		CmdSN:          i.cfg.CmdSN,
		StatSN:         i.expStatSN,
		MaxCmdSN:       lr.MaxCmdSN(),
		Params:         i.neg.res,
	}
	return nil
}

// request appends a Login Request (section 11.12) in the current stage.
func (i *Initiator) request(dst []byte, pairs []pair, transit bool, nsg uint8) ([]byte, error) {
	text, err := appendPairs(nil, pairs)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if len(text) > MaxSegment {
		return dst, fmt.Errorf("%w: a Login Request of %d octets of text, more than %d", ErrConfig, len(text), MaxSegment)
	}
	start := len(dst)
	dst = append(dst, make([]byte, iscsi.BHSLen)...)
	r, _ := iscsi.NewLoginReq(dst[start:])
	r.SetTransit(transit)
	_ = r.SetCSG(i.stage)
	if transit {
		_ = r.SetNSG(nsg)
	}
	r.SetVersionMax(0)
	r.SetVersionMin(0)
	_ = r.SetDataSegmentLength(uint32(len(text)))
	_ = r.SetISID(i.cfg.ISID)
	r.SetTSIH(i.cfg.TSIH)
	r.SetITT(i.cfg.ITT)
	r.SetCID(i.cfg.CID)
	r.SetCmdSN(i.cfg.CmdSN)
	r.SetExpStatSN(i.expStatSN)
	i.reqTransit, i.reqNSG = transit, nsg
	return appendPadded(dst, text), nil
}
