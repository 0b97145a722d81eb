package login

import (
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// TargetPolicy is what a target node allows: the node's name and alias,
// the initiators it accepts and the CHAP credentials it requires.
type TargetPolicy struct {
	Name       string   // the iSCSI target name (iqn., eui. or naa.)
	Alias      string   // TargetAlias, sent to initiators of Normal sessions (section 13.6); empty: none
	Initiators []string // InitiatorNames allowed; empty: anyone
	CHAP       *CHAP    // nil: AuthMethod=None is accepted and no authentication happens
}

// TargetConfig configures the target role of a login. One config may
// serve many connections at once; Target only reads it.
type TargetConfig struct {
	// Lookup finds the policy of the target an initiator names in a Normal
	// session; nil (or a nil result) means not found.
	Lookup func(targetName string) *TargetPolicy
	// Discovery, when non-nil, is the CHAP a Discovery session requires.
	Discovery *CHAP
	// Offer is what this target accepts in negotiation: see Params.
	Offer Params
	// Traditional says the connection is traditional iSCSI over TCP (RFC
	// 7143), not iSER. The target then does not require
	// RDMAExtensions=Yes: it answers an initiator's Yes with No and the
	// login goes on in traditional mode (RFC 7145 section 6.3); the iSER
	// keys are Irrelevant; both sides declare MaxRecvDataSegmentLength;
	// HeaderDigest and DataDigest are negotiated from the Offer (section
	// 13.1). false: iSER, a Normal session must negotiate
	// RDMAExtensions=Yes (RFC 7145 section 5.1).
	Traditional bool
	// QueueDepth is the command window opened at login: every Login
	// Response carries MaxCmdSN = ExpCmdSN + QueueDepth - 1. 0 means
	// DefaultQueueDepth.
	QueueDepth uint32
	// TPGT is the Target Portal Group Tag of the portal the login runs on,
	// returned as TargetPortalGroupTag (section 13.9).
	TPGT uint16
	// Rand is the source of CHAP identifiers and challenges; nil means
	// crypto/rand.Reader.
	Rand io.Reader
	// NewTSIH returns the Target Session Identifying Handle of a new
	// session (section 11.13.3): non-zero, unique among the target's
	// sessions; 0 when no handle is free (the login then fails with Out of
	// resources). nil uses a counter shared by the whole process.
	NewTSIH func() uint16
}

// DefaultQueueDepth is the command window of a TargetConfig with
// QueueDepth 0.
const DefaultQueueDepth = 128

// Validate checks the configuration; the error wraps ErrConfig.
func (c *TargetConfig) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil TargetConfig", ErrConfig)
	}
	if err := c.Offer.Validate(); err != nil {
		return err
	}
	if c.Discovery != nil {
		if err := c.Discovery.validate("Discovery"); err != nil {
			return err
		}
	}
	return nil
}

var tsihCounter atomic.Uint32

func nextTSIH() uint16 {
	for {
		if v := uint16(tsihCounter.Add(1)); v != 0 {
			return v
		}
	}
}

// Target is the target role of one connection's Login Phase. Create it
// with NewTarget and feed it every Login Request with Step until Step
// reports done. It is not safe for concurrent use.
type Target struct {
	cfg    *TargetConfig
	cfgErr error
	rand   io.Reader
	state  loginState
	stage  uint8

	// Fixed by the first Login Request.
	isid   uint64
	tsih   uint16
	cid    uint16
	itt    uint32
	cmdSN  uint32
	statSN uint32 // StatSN of the next response

	exchanges int
	text      []byte // text of Login Requests with the C bit, not yet complete

	named          bool // the first logical text data segment was processed
	discovery      bool
	initiatorName  string
	initiatorAlias string
	targetName     string
	policy         *TargetPolicy
	cred           *CHAP

	auth         authMethod
	authDone     bool
	authProposed bool
	chap         chapTarget

	neg     *negotiator
	opBegun bool
	result  Result
}

// NewTarget returns the target side of a login on one connection. An
// invalid cfg (see TargetConfig.Validate) makes the first Step fail with
// Target error.
func NewTarget(cfg *TargetConfig) *Target {
	t := &Target{cfg: cfg, cfgErr: cfg.Validate(), itt: iscsi.ReservedITT}
	if t.cfgErr == nil {
		t.rand = cfg.Rand
		if t.rand == nil {
			t.rand = rand.Reader
		}
	}
	return t
}

// Result is the outcome of the login; valid once Step reported done with a
// nil error.
func (t *Target) Result() Result { return t.result }

// Step consumes one complete Login Request PDU (BHS and data segment, no
// AHS, no digests; padding optional) and appends exactly one Login Response
// PDU (BHS and padded data segment) to dst. done is true when that response
// carries a final status: success with T=1 into the Full Feature Phase
// (Result is then valid), or a failure status, in which case err is a
// *StatusError and the caller sends the response and closes the connection
// (section 11.13.5). After done, Step appends nothing and returns
// ErrFinished.
func (t *Target) Step(dst, req []byte) (out []byte, done bool, err error) {
	if t.state == stateDone || t.state == stateFailed {
		return dst, true, ErrFinished
	}
	if len(req) < iscsi.BHSLen {
		return t.fail(dst, statusErr(StatusInitiatorError, "a PDU of %d octets is shorter than the 48-octet BHS", len(req)))
	}
	bhs := iscsi.BHS(req[:iscsi.BHSLen])
	if t.state == stateStart {
		t.itt = bhs.ITT()
		t.isid = uint64(bhs.Word(8))<<16 | uint64(bhs.Word(12)>>16)
		t.cid = uint16(bhs.Word(20) >> 16)
	}
	if t.cfgErr != nil {
		return t.fail(dst, statusErr(StatusTargetError, "target misconfigured: %v", t.cfgErr))
	}
	if bhs.Opcode() != iscsi.OpLoginReq {
		return t.fail(dst, statusErr(StatusInvalidDuringLogin, "%v (opcode 0x%02x) during the Login Phase, only Login Requests are allowed (section 6.3)", bhs.Opcode(), uint8(bhs.Opcode())))
	}
	lr := iscsi.LoginReq{InitiatorSNs: iscsi.InitiatorSNs{BHS: bhs}}
	if t.state == stateStart {
		t.isid, t.tsih, t.cid, t.cmdSN = lr.ISID(), lr.TSIH(), lr.CID(), lr.CmdSN()
		t.statSN = lr.ExpStatSN()
	} else if e := t.sameLogin(lr); e != nil {
		return t.fail(dst, e)
	}
	if t.exchanges++; t.exchanges > maxExchanges {
		return t.fail(dst, statusErr(StatusInitiatorError, "more than %d Login Requests in one Login Phase (section 6.2)", maxExchanges))
	}
	if n := bhs.TotalAHSLength(); n != 0 {
		return t.fail(dst, statusErr(StatusInitiatorError, "TotalAHSLength=%d: a Login Request has no AHS (section 11.12)", n))
	}
	dsl := int(bhs.DataSegmentLength())
	if dsl > MaxSegment {
		return t.fail(dst, statusErr(StatusInitiatorError, "DataSegmentLength=%d exceeds the MaxRecvDataSegmentLength of 8192 in force during login (section 6.3)", dsl))
	}
	if len(req) < iscsi.BHSLen+dsl {
		return t.fail(dst, statusErr(StatusInitiatorError, "DataSegmentLength=%d but only %d octets follow the BHS", dsl, len(req)-iscsi.BHSLen))
	}
	if t.state == stateStart {
		if lr.VersionMin() > 0 || lr.VersionMax() < lr.VersionMin() {
			return t.fail(dst, statusErr(StatusUnsupportedVersion, "Version-min=%d, Version-max=%d: this target supports only version 0 (section 11.12.4)", lr.VersionMin(), lr.VersionMax()))
		}
		if t.tsih != 0 {
			return t.fail(dst, statusErr(StatusSessionDoesNotExist, "TSIH=%d: this target does not add connections to existing sessions (section 6.3.1)", t.tsih))
		}
		switch csg := lr.CSG(); csg {
		case StageSecurity, StageOperational:
			t.stage = csg
		case StageFullFeature:
			return t.fail(dst, statusErr(StatusInvalidDuringLogin, "CSG=3 (FullFeaturePhase) in the first Login Request: a login starts in SecurityNegotiation or LoginOperationalNegotiation (section 6.3)"))
		default:
			return t.fail(dst, statusErr(StatusInitiatorError, "CSG=%d is a reserved stage code (section 11.12.3)", csg))
		}
		t.state = stateLogin
	} else if csg := lr.CSG(); csg != t.stage {
		return t.fail(dst, statusErr(StatusInvalidDuringLogin, "CSG=%d, but the login is in stage %d: stages only advance through a transition the target accepted (section 6.3)", csg, t.stage))
	}
	transit, nsg := lr.Transit(), lr.NSG()
	if transit && lr.Continue() {
		return t.fail(dst, statusErr(StatusInitiatorError, "T and C both set: a Login Request with C=1 must have T=0 (section 11.12.2)"))
	}
	if transit {
		if e := checkTransition(t.stage, nsg); e != nil {
			return t.fail(dst, e)
		}
	}
	if len(t.text)+dsl > MaxText {
		return t.fail(dst, statusErr(StatusInitiatorError, "login text longer than %d octets", MaxText))
	}
	t.text = append(t.text, req[iscsi.BHSLen:iscsi.BHSLen+dsl]...)
	if lr.Continue() {
		// Section 6.2: a request with C=1 is answered with an empty
		// response.
		return t.respond(dst, false, 0, nil)
	}
	ltds := t.text
	t.text = nil
	pairs, perr := parsePairs(ltds)
	if perr != nil {
		return t.fail(dst, statusErr(StatusInitiatorError, "%v", perr))
	}
	text, e := t.process(pairs)
	if e != nil {
		return t.fail(dst, statusErr(e.status, "%s", e.reason))
	}
	return t.advance(dst, transit, nsg, text)
}

// sameLogin checks the fields every Login Request of a Login Phase repeats
// (sections 11.12.5 to 11.12.8).
func (t *Target) sameLogin(lr iscsi.LoginReq) *StatusError {
	switch {
	case lr.ISID() != t.isid:
		return statusErr(StatusInitiatorError, "ISID changed from 0x%012x to 0x%012x during login", t.isid, lr.ISID())
	case lr.TSIH() != t.tsih:
		return statusErr(StatusInitiatorError, "TSIH changed from %d to %d during login (section 11.12.6)", t.tsih, lr.TSIH())
	case lr.CID() != t.cid:
		return statusErr(StatusInitiatorError, "CID changed from %d to %d during login (section 11.12.7)", t.cid, lr.CID())
	case lr.ITT() != t.itt:
		return statusErr(StatusInitiatorError, "Initiator Task Tag changed from 0x%08x to 0x%08x: the Login Phase is one task (section 6.3)", t.itt, lr.ITT())
	case lr.CmdSN() != t.cmdSN:
		return statusErr(StatusInitiatorError, "CmdSN changed from %d to %d on the leading login (section 11.12.8)", t.cmdSN, lr.CmdSN())
	}
	return nil
}

// checkTransition applies the stage table of section 6.3 to a request with
// T=1 in stage csg asking for nsg.
func checkTransition(csg, nsg uint8) *StatusError {
	switch {
	case nsg == 2:
		return statusErr(StatusInitiatorError, "NSG=2 is a reserved stage code (section 11.12.3)")
	case csg == StageSecurity && (nsg == StageOperational || nsg == StageFullFeature),
		csg == StageOperational && nsg == StageFullFeature:
		return nil
	}
	return statusErr(StatusInvalidDuringLogin, "transition from stage %d to stage %d is not allowed (section 6.3)", csg, nsg)
}

// process handles the keys of one logical text data segment and returns
// the keys of the response.
func (t *Target) process(pairs []pair) ([]pair, *negError) {
	var out []pair
	first := !t.named
	if first {
		if e := t.session(pairs); e != nil {
			return nil, e
		}
		t.named = true
		if !t.discovery && t.policy.Alias != "" {
			out = append(out, pair{"TargetAlias", t.policy.Alias})
			t.neg.markSent(kTargetAlias, t.policy.Alias)
		}
		// Section 6.3.1: TargetPortalGroupTag in the first Login Response
		// after the first Login Request with C=0, for all session types.
		tpgt := strconv.Itoa(int(t.cfg.TPGT))
		out = append(out, pair{"TargetPortalGroupTag", tpgt})
		t.neg.markSent(kTargetPortalGroupTag, tpgt)
		if t.stage == StageOperational {
			if t.cred != nil {
				return nil, nerr(StatusAuthFailure, "the initiator skipped SecurityNegotiation, but %s requires CHAP authentication (section 6.3.1)", t.what())
			}
			t.authDone = true
		}
	}
	sessionKeys := func(idx int) bool {
		return first && (idx == kInitiatorName || idx == kTargetName || idx == kSessionType || idx == kInitiatorAlias) // taken by session
	}
	g, e := t.neg.sortKeys(pairs, t.stage, sessionKeys, t.lateSessionKey)
	if e != nil {
		return nil, e
	}
	out = append(out, g.notUnderstood...)
	if t.stage == StageSecurity {
		a, e := t.authenticate(g.auth)
		return append(out, a...), e
	}
	continued := t.opBegun
	answers, _, e := t.neg.receive(g.items)
	if e != nil {
		return nil, e
	}
	out = append(out, answers...)
	if continued {
		if o := t.neg.outstanding(); o != "" {
			return nil, nerr(StatusMissingParameter, "no answer to the target's proposal %s (section 6.2)", o)
		}
	}
	t.opBegun = true
	out = append(out, t.proposals()...)
	return append(out, t.declarations()...), nil
}

func (t *Target) sessionType() string {
	if t.discovery {
		return SessionDiscovery
	}
	return SessionNormal
}

// what names the target for reasons.
func (t *Target) what() string {
	if t.discovery {
		return "Discovery"
	}
	return "TargetName=" + quote(t.targetName)
}

// session takes the keys that identify the session from the first logical
// text data segment (sections 6.3, 13.4, 13.5, 13.21) and decides who may
// log in.
func (t *Target) session(pairs []pair) *negError {
	var name, alias, target, stype *string
	for i := range pairs {
		var dst **string
		switch pairs[i].key {
		case "InitiatorName":
			dst = &name
		case "InitiatorAlias":
			dst = &alias
		case "TargetName":
			dst = &target
		case "SessionType":
			dst = &stype
		default:
			continue
		}
		if *dst != nil {
			return nerr(StatusInitiatorError, "%s sent twice (section 6.3)", pairs[i].key)
		}
		*dst = &pairs[i].value
	}
	if name == nil {
		return nerr(StatusMissingParameter, "InitiatorName missing from the first Login Request (sections 6.3, 13.5)")
	}
	if err := checkName(*name); err != nil {
		return nerr(StatusInitiatorError, "%s: %v", kv("InitiatorName", *name), err)
	}
	t.initiatorName = *name
	if alias != nil {
		if err := checkLocalName(*alias); err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv("InitiatorAlias", *alias), err)
		}
		t.initiatorAlias = *alias
	}
	switch {
	case stype == nil || *stype == SessionNormal:
	case *stype == SessionDiscovery:
		t.discovery = true
	default:
		return nerr(StatusSessionTypeNotSupported, "%s: this target supports Normal and Discovery sessions (section 13.21)", kv("SessionType", *stype))
	}
	if target != nil {
		if err := checkName(*target); err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv("TargetName", *target), err)
		}
		t.targetName = *target
	}
	if t.discovery {
		t.cred = t.cfg.Discovery
	} else {
		if target == nil {
			return nerr(StatusMissingParameter, "TargetName missing from the first Login Request of a Normal session (sections 6.3, 13.4)")
		}
		if t.cfg.Lookup != nil {
			t.policy = t.cfg.Lookup(t.targetName)
		}
		if t.policy == nil {
			return nerr(StatusNotFound, "%s does not exist at this portal", kv("TargetName", t.targetName))
		}
		if t.policy.CHAP != nil {
			if err := t.policy.CHAP.validate(t.targetName); err != nil {
				return nerr(StatusTargetError, "target misconfigured: %v", err)
			}
		}
		if len(t.policy.Initiators) > 0 && !slices.Contains(t.policy.Initiators, t.initiatorName) {
			return nerr(StatusAuthorizationFailure, "%s is not allowed to access %s", kv("InitiatorName", t.initiatorName), kv("TargetName", t.targetName))
		}
		t.cred = t.policy.CHAP
	}
	t.chap = chapTarget{cred: t.cred, rand: t.rand}
	t.neg = newNegotiator(roleTarget, t.cfg.Offer, t.discovery, true, t.cfg.Traditional)
	for i, p := range []*string{kSessionType: stype, kInitiatorName: name, kTargetName: target, kInitiatorAlias: alias} {
		if p != nil {
			t.neg.st[i].got = true
		}
	}
	return nil
}

// lateSessionKey handles a session key after the first text (already
// checked for sender, stage and repetition).
func (t *Target) lateSessionKey(idx int, v string) *negError {
	switch idx {
	case kInitiatorAlias:
		if err := checkLocalName(v); err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv("InitiatorAlias", v), err)
		}
		t.initiatorAlias = v
	case kSessionType:
		// Section 13.21: SessionType SHOULD come in the first request; the
		// session was set up as Normal, so only that value can follow.
		if v != SessionNormal || t.discovery {
			return nerr(StatusInitiatorError, "%s after the first Login Request: the session was set up as %s (section 13.21)", kv("SessionType", v), t.sessionType())
		}
	case kTargetName:
		if !t.discovery {
			return nerr(StatusInitiatorError, "%s after the first Login Request (section 13.4)", kv("TargetName", v))
		}
		if err := checkName(v); err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv("TargetName", v), err)
		}
		t.targetName = v
	case kInitiatorName:
		return nerr(StatusInitiatorError, "InitiatorName after the first Login Request (section 13.5)")
	}
	return nil
}

// authenticate runs the SecurityNegotiation stage (sections 6.3.2, 12.1).
func (t *Target) authenticate(keys map[int]string) ([]pair, *negError) {
	var out []pair
	selectedNow := false
	am, hasAM := keys[kAuthMethod]
	delete(keys, kAuthMethod)
	if t.auth == authUnset {
		switch {
		case hasAM:
			vals, e := authList(am)
			if e != nil {
				return nil, e
			}
			if t.authProposed {
				// Our proposal was AuthMethod=CHAP: the only admissible
				// selection is CHAP (section 6.2.1).
				if len(vals) != 1 || vals[0] != "CHAP" {
					return nil, nerr(StatusAuthFailure, "%s in answer to AuthMethod=CHAP: %s requires CHAP", kv("AuthMethod", am), t.what())
				}
				t.auth = authCHAP
				break
			}
			// Section 6.2.1: the first method of the initiator's list
			// that this target supports and may use for it.
			for _, v := range vals {
				if v == "CHAP" && t.cred != nil {
					t.auth = authCHAP
					break
				}
				if v == valNone && t.cred == nil {
					t.auth = authNone
					break
				}
			}
			switch t.auth {
			case authCHAP:
				out = append(out, pair{"AuthMethod", "CHAP"})
				selectedNow = true
			case authNone:
				out = append(out, pair{"AuthMethod", valNone})
				t.authDone = true
			default:
				if t.cred != nil {
					return nil, nerr(StatusAuthFailure, "%s: %s requires CHAP authentication", kv("AuthMethod", am), t.what())
				}
				return nil, nerr(StatusAuthFailure, "%s: %s has no CHAP credentials configured, so only AuthMethod=None is possible", kv("AuthMethod", am), t.what())
			}
			t.neg.markSent(kAuthMethod, out[len(out)-1].value)
		case t.authProposed:
			return nil, nerr(StatusMissingParameter, "no answer to the target's proposal AuthMethod=CHAP (section 12.1)")
		case t.cred == nil:
			// No AuthMethod: nothing to authenticate, nothing required.
			if len(keys) > 0 {
				return nil, nerr(StatusInitiatorError, "%s without AuthMethod=CHAP (section 12.1)", keyTable[firstKey(keys)].name)
			}
			t.auth, t.authDone = authNone, true
			return nil, nil
		default:
			if len(keys) > 0 {
				return nil, nerr(StatusInitiatorError, "%s without AuthMethod=CHAP (section 12.1)", keyTable[firstKey(keys)].name)
			}
			// Section 6.3.2: the target directs the negotiation.
			t.authProposed = true
			t.neg.markSent(kAuthMethod, "CHAP")
			return []pair{{"AuthMethod", "CHAP"}}, nil
		}
	}
	if t.auth != authCHAP {
		if len(keys) > 0 {
			return nil, nerr(StatusInitiatorError, "%s without AuthMethod=CHAP (section 12.1)", keyTable[firstKey(keys)].name)
		}
		return out, nil
	}
	if t.authDone {
		if len(keys) > 0 {
			return nil, nerr(StatusInitiatorError, "%s after CHAP completed (section 12.1.3)", keyTable[firstKey(keys)].name)
		}
		return out, nil
	}
	p, e := t.chap.step(keys, selectedNow)
	if e != nil {
		return nil, e
	}
	t.authDone = t.chap.state == chapDone
	return append(out, p...), nil
}

// firstKey is the lowest key index of keys, for deterministic reasons.
func firstKey(keys map[int]string) int {
	first := numKeys
	for i := range keys {
		first = min(first, i)
	}
	return first
}

// authList parses an AuthMethod list-of-values.
func authList(v string) ([]string, *negError) {
	vals := strings.Split(v, ",")
	for _, e := range vals {
		if e == "" || reserved(e) {
			return nil, nerr(StatusInitiatorError, "%s: %q is not a valid list element (section 6.2.1)", kv("AuthMethod", v), e)
		}
	}
	return vals, nil
}

// proposals are the target's own proposals in a
// LoginOperationalNegotiation response: on an iSER connection
// RDMAExtensions=Yes when the initiator did not offer it in its first
// request (RFC 7145 section 6.3: the target "MUST offer the key in the
// first Login Response PDU" it may; a Traditional target does not),
// every key whose Offer makes a difference from the default but the
// initiator did not propose, and FirstBurstLength when the default would
// exceed the negotiated MaxBurstLength (section 13.14).
func (t *Target) proposals() []pair {
	if t.discovery {
		return nil
	}
	var idxs []int
	for _, idx := range []int{kRDMAExtensions, kImmediateData, kMaxBurstLength, kFirstBurstLength,
		kMaxConnections, kMaxOutstandingR2T, kDefaultTime2Wait, kDefaultTime2Retain,
		kTargetRecvDataSegmentLength, kInitiatorRecvDataSegmentLength} {
		if t.neg.changes(idx) || idx == kFirstBurstLength && t.neg.res.MaxBurstLength < t.neg.res.FirstBurstLength {
			idxs = append(idxs, idx)
		}
	}
	return t.neg.propose(idxs...)
}

// declarations are the target's declarative keys: MaxRecvDataSegmentLength
// when iSER is not in use (section 13.12: in a Discovery session when the
// initiator declared it or ours is not the default, in a Normal session on
// a Traditional connection always) and MaxOutstandingUnexpectedPDUs in
// reply to an initiator of an iSER session that declared it (RFC 7145
// section 6.7). Initiators that never use a key are not sent it: some
// (Linux's) fail on keys they do not know.
func (t *Target) declarations() []pair {
	n := t.neg
	if t.discovery {
		if n.st[kMaxRecvDataSegmentLength].got || t.cfg.Offer.MaxRecvDataSegmentLength != Defaults().MaxRecvDataSegmentLength {
			return n.propose(kMaxRecvDataSegmentLength)
		}
		return nil
	}
	if n.traditional {
		return n.propose(kMaxRecvDataSegmentLength)
	}
	if n.st[kMaxOutstandingUnexpectedPDUs].got {
		return n.propose(kMaxOutstandingUnexpectedPDUs)
	}
	return nil
}

// advance decides the stage transition (section 6.3) and appends the
// response.
func (t *Target) advance(dst []byte, transit bool, nsg uint8, text []pair) ([]byte, bool, error) {
	ready := false
	if transit {
		switch t.stage {
		case StageSecurity:
			ready = t.authDone
		case StageOperational:
			ready = t.neg.outstanding() == "" && (t.discovery || t.neg.traditional || t.neg.res.RDMAExtensions)
		}
	}
	enc, e := encodeText(text)
	if e != nil {
		return t.fail(dst, e)
	}
	if !ready {
		return t.respond(dst, false, 0, enc)
	}
	if t.stage == StageSecurity && nsg == StageFullFeature && t.needOperational() {
		// The selected NSG may be lower than requested (section 6.3):
		// the target still has keys to offer.
		nsg = StageOperational
	}
	if nsg != StageFullFeature {
		out, done, err := t.respond(dst, true, nsg, enc)
		t.stage = nsg
		return out, done, err
	}
	if e := t.neg.finish(); e != nil {
		return t.fail(dst, statusErr(e.status, "%s", e.reason))
	}
	tsih := nextTSIH()
	if t.cfg.NewTSIH != nil {
		tsih = t.cfg.NewTSIH()
	}
	if tsih == 0 {
		return t.fail(dst, statusErr(StatusOutOfResources, "no TSIH free for a new session"))
	}
	t.tsih = tsih
	out, _, _ := t.respond(dst, true, StageFullFeature, enc)
	t.result = Result{
		SessionType:    t.sessionType(),
		InitiatorName:  t.initiatorName,
		InitiatorAlias: t.initiatorAlias,
		TargetName:     t.targetName,
		ISID:           t.isid,
		TSIH:           tsih,
		CID:            t.cid,
		TPGT:           t.cfg.TPGT,
		CmdSN:          t.cmdSN,
		StatSN:         t.statSN,
		MaxCmdSN:       t.maxCmdSN(),
		Params:         t.neg.res,
		Policy:         t.policy,
	}
	if t.policy != nil {
		t.result.TargetAlias = t.policy.Alias
	}
	t.state = stateDone
	return out, true, nil
}

// needOperational reports whether the target needs a
// LoginOperationalNegotiation stage: always for Normal sessions (to
// negotiate RDMAExtensions, RFC 7145 section 6.3, or on a Traditional
// connection to declare MaxRecvDataSegmentLength), for Discovery sessions
// only to declare a MaxRecvDataSegmentLength other than the default.
func (t *Target) needOperational() bool {
	return !t.discovery || t.cfg.Offer.MaxRecvDataSegmentLength != Defaults().MaxRecvDataSegmentLength
}

func (t *Target) maxCmdSN() uint32 {
	var qd uint32
	if t.cfg != nil {
		qd = t.cfg.QueueDepth
	}
	if qd == 0 {
		qd = DefaultQueueDepth
	}
	return t.cmdSN + qd - 1
}

// encodeText encodes the keys of a response, which must fit in one Login
// Response (section 6.3: the default MaxRecvDataSegmentLength of 8192 is
// in force during login).
func encodeText(pairs []pair) ([]byte, *StatusError) {
	text, err := appendPairs(nil, pairs)
	if err != nil {
		return nil, statusErr(StatusTargetError, "%v", err)
	}
	if len(text) > MaxSegment {
		return nil, statusErr(StatusInitiatorError, "the answer to the login text would be %d octets, more than the %d a Login Response may carry (too many unknown keys?)", len(text), MaxSegment)
	}
	return text, nil
}

// respond appends a Login Response with status Success.
func (t *Target) respond(dst []byte, transit bool, nsg uint8, text []byte) ([]byte, bool, error) {
	dst, r := t.header(dst, len(text))
	r.SetTransit(transit)
	_ = r.SetCSG(t.stage)
	if transit {
		_ = r.SetNSG(nsg)
	}
	dst = appendPadded(dst, text)
	return dst, false, nil
}

// header appends a Login Response BHS with the fields every response
// carries (section 11.13) and returns it.
func (t *Target) header(dst []byte, dataLen int) ([]byte, iscsi.LoginResp) {
	start := len(dst)
	dst = append(dst, make([]byte, iscsi.BHSLen)...)
	r, _ := iscsi.NewLoginResp(dst[start:])
	_ = r.SetDataSegmentLength(uint32(dataLen))
	_ = r.SetISID(t.isid & (1<<48 - 1))
	r.SetTSIH(t.tsih)
	r.SetITT(t.itt)
	r.SetStatSN(t.statSN)
	t.statSN++ // section 11.13.4: the next response carries StatSN+1
	r.SetExpCmdSN(t.cmdSN)
	r.SetMaxCmdSN(t.maxCmdSN())
	r.SetVersionMax(0)
	r.SetVersionActive(0)
	return dst, r
}

// fail appends a Login Response with the failure status (the login
// reject of section 6.3.1: T, CSG and NSG reserved, no text) and ends the
// login.
func (t *Target) fail(dst []byte, e *StatusError) ([]byte, bool, error) {
	dst, r := t.header(dst, 0)
	r.SetStatusClass(e.Class)
	r.SetStatusDetail(e.Detail)
	t.state = stateFailed
	return dst, true, e
}
