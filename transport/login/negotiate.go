package login

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// role is the side a negotiator speaks for.
type role uint8

const (
	roleTarget role = iota
	roleInitiator
)

// peerFlag is the Senders flag the peer's keys must carry.
func (r role) peerFlag() keyFlags {
	if r == roleTarget {
		return fromInitiator
	}
	return fromTarget
}

func (r role) peerName() string {
	if r == roleTarget {
		return "an initiator"
	}
	return "a target"
}

// rdmaState is what is known of RDMAExtensions (RFC 7145 section 6.3).
type rdmaState uint8

const (
	rdmaUnknown rdmaState = iota // not yet negotiated (a Normal session will require Yes)
	rdmaYes
	rdmaNo // Discovery session (RDMAExtensions is irrelevant) or a Traditional connection
)

// keyState follows one key through a login (section 6.2).
type keyState struct {
	got      bool   // the peer sent the key (proposal, declaration or answer)
	sent     bool   // we sent it (proposal, declaration or answer)
	proposed bool   // we proposed it: what the peer sends is the answer
	pending  bool   // we proposed it and its answer is required
	proposal string // the value we proposed or declared
}

// negError is a negotiation failure: the status a target reports and the
// reason, naming the key and value.
type negError struct {
	status Status
	reason string
}

func nerr(s Status, format string, args ...any) *negError {
	return &negError{status: s, reason: fmt.Sprintf(format, args...)}
}

// item is an operational key of a logical text data segment, with its
// position for the order of the answers.
type item struct {
	idx   int
	value string
	pos   int
}

// negotiator carries out the text negotiation of section 6.2 for the
// operational keys of section 13 and RFC 7145 section 6, in either role.
// It starts from the defaults, proposes the Offer, accepts the peer's
// proposals and checks the peer's answers against the result functions.
// On a traditional connection (iSCSI over TCP) RDMAExtensions is never
// Yes: the initiator does not propose it, the target answers No (RFC 7145
// section 6.3), and the keys of traditional mode (digests,
// MaxRecvDataSegmentLength) are negotiated instead of the iSER ones.
type negotiator struct {
	role        role
	offer       Params
	res         Params
	discovery   bool
	leading     bool
	traditional bool
	rdma        rdmaState
	st          [numKeys]keyState
	unknown     map[string]bool // the keys the peer sent that this node does not know
}

func newNegotiator(r role, offer Params, discovery, leading, traditional bool) *negotiator {
	n := &negotiator{role: r, offer: offer, discovery: discovery, leading: leading, traditional: traditional}
	n.res = Defaults()
	n.res.MaxRecvDataSegmentLength = offer.MaxRecvDataSegmentLength
	if !traditional {
		// Without iSER the key is never declared (RFC 7145 section 6.7).
		n.res.MaxOutstandingUnexpectedPDUs = offer.MaxOutstandingUnexpectedPDUs
	}
	switch {
	case discovery, traditional:
		n.rdma = rdmaNo
	case !leading:
		// RFC 7145 section 5.1: connections after the leading one enable
		// iSER-assisted mode without exchanging RDMAExtensions.
		n.rdma = rdmaYes
		n.res.RDMAExtensions = true
	}
	return n
}

// iser reports whether iSER-assisted mode is, or is going to be, in force:
// a Normal session on an iSER connection must negotiate it, so only
// Discovery sessions and Traditional connections run without it.
func (n *negotiator) iser() bool { return n.rdma != rdmaNo }

// irrelevant reports whether key idx is irrelevant in this session: by
// the session type (Irrelevant when: SessionType=Discovery) or without
// iSER-assisted mode (Irrelevant when: RDMAExtensions=No, RFC 7145
// sections 6.4 to 6.10).
func (n *negotiator) irrelevant(idx int) bool {
	d := &keyTable[idx]
	return n.discovery && d.has(irrDiscovery) || !n.iser() && d.has(irrWithoutRDMA)
}

// check applies the rules that do not depend on the value: who may send the
// key (section 13, "Senders"), in which stage (sections 6.3 and 12), on
// which connection (Use: LO), and that it is not sent twice (section 6.3).
// stage is 0 (SecurityNegotiation) or 1 (LoginOperationalNegotiation).
func (n *negotiator) check(idx int, stage uint8) *negError {
	d, st := &keyTable[idx], &n.st[idx]
	if st.got {
		return nerr(StatusInitiatorError, "%s sent twice: renegotiation is not allowed during login (section 6.3)", d.name)
	}
	st.got = true
	if d.kind == kindFFPOnly {
		return nerr(StatusInitiatorError, "%s is used only in the Full Feature Phase (section 13.3)", d.name)
	}
	if !d.has(n.role.peerFlag()) && !st.sent {
		return nerr(StatusInitiatorError, "%s is not sent by %s (section 13)", d.name, n.role.peerName())
	}
	if stage == 0 && !d.has(anyStage|securityOnly) {
		return nerr(StatusInitiatorError, "%s is an operational key, not allowed in SecurityNegotiation (sections 6.3, 12)", d.name)
	}
	if stage == 1 && d.has(securityOnly) {
		return nerr(StatusInitiatorError, "%s is allowed only in SecurityNegotiation (section 12)", d.name)
	}
	if !n.leading && d.has(leadingOnly) {
		return nerr(StatusInitiatorError, "%s is leading-only (Use: LO) but this is not the leading connection (section 13)", d.name)
	}
	return nil
}

// keyGroups are the keys of one logical text data segment, sorted by who
// handles them.
type keyGroups struct {
	notUnderstood []pair         // the answers to the unknown keys (section 6.2)
	auth          map[int]string // AuthMethod and the CHAP keys
	items         []item         // the operational keys, for receive
}

// sortKeys is the key loop both roles run over a logical text data segment
// from the peer. An unknown key is answered NotUnderstood (section 6.2),
// unless its value is reserved or it comes twice; a known key that skip
// does not pass over must pass check in stage, and then goes to session
// (the session keys), to auth or to items. The initiator reads only the
// reason of the error.
func (n *negotiator) sortKeys(pairs []pair, stage uint8, skip func(idx int) bool, session func(idx int, v string) *negError) (keyGroups, *negError) {
	g := keyGroups{auth: map[int]string{}}
	for pos, p := range pairs {
		idx := lookupKey(p.key)
		if idx < 0 {
			if e := n.unknownKey(p); e != nil {
				return keyGroups{}, e
			}
			g.notUnderstood = append(g.notUnderstood, pair{p.key, valNotUnderstood})
			continue
		}
		if skip(idx) {
			continue
		}
		if e := n.check(idx, stage); e != nil {
			return keyGroups{}, e
		}
		switch keyTable[idx].kind {
		case kindSession:
			if e := session(idx, p.value); e != nil {
				return keyGroups{}, e
			}
		case kindAuth:
			g.auth[idx] = p.value
		default:
			g.items = append(g.items, item{idx, p.value, pos})
		}
	}
	return g, nil
}

// unknownKey records a key this node does not know; a reserved value
// (section 6.2) or a second occurrence (section 6.3) is an error.
func (n *negotiator) unknownKey(p pair) *negError {
	if reserved(p.value) {
		if n.role == roleInitiator {
			return nerr(StatusInitiatorError, "%s: the initiator sent no such key", kv(p.key, p.value))
		}
		return nerr(StatusInitiatorError, "%s: %s is not a valid proposal (section 6.2)", kv(p.key, p.value), p.value)
	}
	if n.unknown[p.key] {
		return nerr(StatusInitiatorError, "%s sent twice (section 6.3)", p.key)
	}
	if n.unknown == nil {
		n.unknown = map[string]bool{}
	}
	n.unknown[p.key] = true
	return nil
}

// markSent records that we sent key idx with value v outside propose (a
// declaration or a session key).
func (n *negotiator) markSent(idx int, v string) {
	n.st[idx].sent = true
	n.st[idx].proposal = v
}

// prio orders the keys of one text so that the keys others depend on are
// settled first: RDMAExtensions (RFC 7145 section 6.3: "Negotiating the
// RDMAExtensions key first enables a node to negotiate the optimal value
// for other keys"), then MaxBurstLength, which bounds FirstBurstLength.
func prio(idx int) int {
	switch idx {
	case kRDMAExtensions:
		return 0
	case kMaxBurstLength, kInitialR2T, kImmediateData:
		return 1
	}
	return 2
}

// receive processes the operational keys of one logical text data segment
// (already passed through check) and returns the answers to send, in the
// order the keys came. required reports whether some answer is needed by
// the peer to settle the key (section 6.2.2): an answer that merely agrees
// with the peer's value is not.
func (n *negotiator) receive(items []item) (answers []pair, required string, err *negError) {
	order := slices.Clone(items)
	slices.SortStableFunc(order, func(a, b item) int { return prio(a.idx) - prio(b.idx) })
	type ans struct {
		pos int
		p   pair
	}
	var out []ans
	for _, it := range order {
		v, answer, e := n.one(it.idx, it.value)
		if e != nil {
			return nil, "", e
		}
		if answer {
			out = append(out, ans{it.pos, pair{keyTable[it.idx].name, v}})
			if v != it.value && v != valIrrelevant && required == "" {
				required = keyTable[it.idx].name
			}
		}
	}
	slices.SortFunc(out, func(a, b ans) int { return a.pos - b.pos })
	for _, a := range out {
		answers = append(answers, a.p)
	}
	return answers, required, nil
}

// one processes one key from the peer: the answer to our proposal, or the
// peer's proposal or declaration. It returns our answer, if any.
func (n *negotiator) one(idx int, v string) (string, bool, *negError) {
	d, st := &keyTable[idx], &n.st[idx]
	if st.proposed {
		// The answer, required or optional (section 6.2.2): either way
		// it must be a possible outcome of the result function.
		st.pending = false
		return "", false, n.checkAnswer(idx, v)
	}
	if st.sent && (v == valNotUnderstood || v == valIrrelevant) {
		// The peer's reply to one of our declarations.
		if v == valNotUnderstood && !d.has(later) {
			return "", false, nerr(StatusInitiatorError, "%s=NotUnderstood: every key of RFC 7143 must be understood (section 6.2)", d.name)
		}
		return "", false, nil
	}
	if reserved(v) {
		return "", false, nerr(StatusInitiatorError, "%s: %s is not a valid proposal or declaration (section 6.2)", kv(d.name, v), v)
	}
	irrelevant := n.irrelevant(idx)
	switch d.kind {
	case kindDeclarative:
		return "", false, n.declared(idx, v, irrelevant)
	case kindAnd, kindOr:
		b, ok := parseBool(v)
		if !ok {
			return "", false, nerr(StatusInitiatorError, "%s: not a boolean-value (Yes or No)", kv(d.name, v))
		}
		if irrelevant {
			return valIrrelevant, true, nil
		}
		if idx == kRDMAExtensions && !n.traditional {
			if !b {
				return "", false, rdmaRequired(n.role)
			}
			n.rdma = rdmaYes
		}
		ours := *d.flag(&n.offer)
		if idx == kRDMAExtensions {
			// RFC 7145 section 6.3: a node that does not support
			// iSER-assisted mode here answers No, and the login goes
			// on in traditional mode.
			ours = !n.traditional
		}
		r := b && ours
		if d.kind == kindOr {
			r = b || ours
		}
		*d.flag(&n.res) = r
		return boolValue(r), true, nil
	case kindMin, kindMax:
		x, err := d.checkNumber(v)
		if err != nil {
			return "", false, nerr(StatusInitiatorError, "%s: %v", kv(d.name, v), err)
		}
		if irrelevant {
			return valIrrelevant, true, nil
		}
		ours := n.ours(idx)
		r := min(x, ours)
		if d.kind == kindMax {
			r = max(x, ours)
		}
		if idx == kFirstBurstLength {
			// Section 13.14: FirstBurstLength MUST NOT exceed
			// MaxBurstLength (settled first, see prio).
			r = min(r, uint64(n.res.MaxBurstLength))
		}
		if d.num != nil {
			*d.num(&n.res) = uint32(r)
		}
		return strconv.FormatUint(r, 10), true, nil
	case kindList:
		vals := strings.Split(v, ",")
		for _, e := range vals {
			if e == "" || reserved(e) {
				return "", false, nerr(StatusInitiatorError, "%s: %q is not a valid list element (section 6.2.1)", kv(d.name, v), e)
			}
		}
		if irrelevant {
			return valIrrelevant, true, nil
		}
		if d.flag != nil && n.traditional {
			// HeaderDigest, DataDigest (section 13.1): the first value
			// of the proposer's list this node supports (section
			// 6.2.1); values it does not know are skipped.
			for _, e := range vals {
				if e == valNone || e == valCRC32C && *d.flag(&n.offer) {
					*d.flag(&n.res) = e == valCRC32C
					return e, true, nil
				}
			}
			return valReject, true, nil
		}
		want := valNone // HeaderDigest, DataDigest: iSER forbids digests
		if idx == kTaskReporting {
			want = "RFC3720"
		}
		if slices.Contains(vals, want) {
			return want, true, nil
		}
		if d.has(irrWithRDMA) && n.iser() {
			// RFC 7145 section 6.1: irrelevant, None is implied.
			return valIrrelevant, true, nil
		}
		return valReject, true, nil
	case kindObsolete:
		if n.iser() {
			return valIrrelevant, true, nil // RFC 7145 section 6.6
		}
		return valReject, true, nil // section 13.25
	case kindObsoleteInt:
		return valReject, true, nil // section 13.25
	}
	return "", false, nerr(StatusInitiatorError, "%s cannot be negotiated here", d.name)
}

// rdmaRequired is the failure when RDMAExtensions=No on an iSER
// connection (not Traditional): there this implementation runs only
// iSER-assisted mode. RFC 7145 section 5.1 says a login that does
// not negotiate RDMAExtensions=Yes continues in Traditional iSCSI mode,
// which the RDMA connection the login runs on cannot carry (the connection
// "may need to be torn down"); RFC 7145 section 10.1.4 lets the target end
// such a Login Phase with any non-zero Status-Class. The request is not
// going to succeed if retried, so the class is Initiator Error (section
// 11.13.5: "The request should not be tried again"), detail 0
// (miscellaneous).
func rdmaRequired(r role) *negError {
	if r == roleTarget {
		return nerr(StatusInitiatorError, "RDMAExtensions=No: this target serves iSER-assisted mode only; a Normal session must negotiate RDMAExtensions=Yes (RFC 7145 sections 5.1 and 6.3)")
	}
	return nerr(StatusInitiatorError, "the target refused RDMAExtensions=Yes: iSER-assisted mode is required (RFC 7145 section 5.1)")
}

// ours is this node's value of a numerical key.
func (n *negotiator) ours(idx int) uint64 {
	d := &keyTable[idx]
	if d.num != nil {
		return uint64(*d.num(&n.offer))
	}
	return d.def
}

// declared records the peer's declaration of key idx (section 6).
func (n *negotiator) declared(idx int, v string, irrelevant bool) *negError {
	d := &keyTable[idx]
	if idx == kNodeArchitecture {
		return nil // section 13.26.2: a node may silently discard it
	}
	var x uint64
	var b bool
	switch {
	case d.has(numeric):
		var err error
		if x, err = d.checkNumber(v); err != nil {
			return nerr(StatusInitiatorError, "%s: %v", kv(d.name, v), err)
		}
	case d.has(boolean):
		var ok bool
		if b, ok = parseBool(v); !ok {
			return nerr(StatusInitiatorError, "%s: not a boolean-value (Yes or No)", kv(d.name, v))
		}
	}
	if irrelevant || d.has(irrWithRDMA) && n.iser() {
		// RFC 7145 section 6.2: MaxRecvDataSegmentLength "MUST be ignored
		// if it is declared" in iSER-assisted mode; the iSER keys mean
		// nothing without it.
		return nil
	}
	switch {
	case d.num != nil:
		*d.num(&n.res) = uint32(x)
	case d.flag != nil:
		*d.flag(&n.res) = b
	}
	if idx == kTaggedBufferForSolicitedDataOnly {
		n.res.TaggedBufferDeclared = true
	}
	return nil
}

// checkAnswer checks the peer's answer v to our proposal of key idx
// against the key's result function (section 13: "Minimum means that the
// selected value cannot exceed the offered value", ...) and records it.
func (n *negotiator) checkAnswer(idx int, v string) *negError {
	d, st := &keyTable[idx], &n.st[idx]
	bad := func(why string) *negError {
		return nerr(StatusInitiatorError, "%s answered to our %s: %s", kv(d.name, v), kv(d.name, st.proposal), why)
	}
	switch v {
	case valNotUnderstood:
		if idx == kRDMAExtensions {
			return rdmaRequired(n.role)
		}
		if !d.has(later) {
			return bad("every key of RFC 7143 must be understood (section 6.2)")
		}
		return nil // the key stays at its default
	case valIrrelevant:
		if idx == kRDMAExtensions && !n.discovery {
			return rdmaRequired(n.role)
		}
		return nil
	case valReject:
		if d.kind == kindList {
			return nil // section 6.2: the key keeps its default (None)
		}
		if idx == kRDMAExtensions {
			return rdmaRequired(n.role)
		}
		return bad("the value we offered is admissible, so Reject is not (section 6.2.2)")
	}
	switch d.kind {
	case kindAnd, kindOr:
		b, ok := parseBool(v)
		if !ok {
			return bad("not a boolean-value")
		}
		ours := st.proposal == valYes
		if d.kind == kindAnd && !ours && b {
			return bad("Yes is not a possible result of AND with No (section 13)")
		}
		if d.kind == kindOr && ours && !b {
			return bad("No is not a possible result of OR with Yes (section 13)")
		}
		if idx == kRDMAExtensions {
			if !b {
				return rdmaRequired(n.role)
			}
			n.rdma = rdmaYes
		}
		*d.flag(&n.res) = b
	case kindMin, kindMax:
		x, err := d.checkNumber(v)
		if err != nil {
			return bad(err.Error())
		}
		ours, _ := parseNumber(st.proposal)
		if d.kind == kindMin && x > ours {
			return bad("exceeds the offered value (result function Minimum, section 13)")
		}
		if d.kind == kindMax && x < ours {
			return bad("is below the offered value (result function Maximum, section 13)")
		}
		if d.num != nil {
			*d.num(&n.res) = uint32(x)
		}
	case kindList:
		if !slices.Contains(strings.Split(st.proposal, ","), v) {
			return bad("not one of the offered values (section 6.2.1)")
		}
		if d.flag != nil {
			*d.flag(&n.res) = v == valCRC32C // HeaderDigest, DataDigest
		}
	default:
		return bad("not a negotiated key")
	}
	return nil
}

// propose returns our proposals (or declarations) of the given keys that
// neither side has sent yet, and records them. A proposal whose outcome is
// settled by our own value (AND with No, OR with Yes, section 6.2.2) takes
// effect at once; the others wait for the answer. Keys irrelevant in this
// session, and RDMAExtensions on a Traditional connection, are not sent.
func (n *negotiator) propose(idxs ...int) []pair {
	var out []pair
	for _, idx := range idxs {
		d, st := &keyTable[idx], &n.st[idx]
		if st.sent || st.got && d.kind != kindDeclarative {
			continue // declarations go both ways; proposals only once
		}
		if n.irrelevant(idx) || idx == kRDMAExtensions && n.traditional {
			continue
		}
		var v string
		switch d.kind {
		case kindAnd, kindOr:
			b := *d.flag(&n.offer)
			if idx == kRDMAExtensions {
				b = true
			}
			v = boolValue(b)
			if d.kind == kindAnd && !b || d.kind == kindOr && b {
				*d.flag(&n.res) = b
			} else {
				st.pending = true
			}
		case kindMin, kindMax:
			x := n.ours(idx)
			if idx == kFirstBurstLength {
				x = min(x, uint64(n.res.MaxBurstLength))
			}
			v = strconv.FormatUint(x, 10)
			st.pending = true
		case kindList:
			v = valNone
			if d.flag != nil && n.traditional && *d.flag(&n.offer) {
				v = valCRC32C + "," + valNone // section 13.1, in order of preference
			}
			st.pending = true
		case kindDeclarative:
			switch idx {
			case kMaxOutstandingUnexpectedPDUs:
				v = strconv.FormatUint(uint64(n.offer.MaxOutstandingUnexpectedPDUs), 10)
			case kMaxRecvDataSegmentLength:
				v = strconv.FormatUint(uint64(n.offer.MaxRecvDataSegmentLength), 10)
			case kISERHelloRequired, kTaggedBufferForSolicitedDataOnly:
				*d.flag(&n.res) = *d.flag(&n.offer)
				v = boolValue(*d.flag(&n.offer))
			default:
				continue
			}
		default:
			continue
		}
		st.sent, st.proposal = true, v
		st.proposed = d.kind != kindDeclarative
		out = append(out, pair{d.name, v})
	}
	return out
}

// changes reports whether proposing key idx with our Offer can change the
// outcome from the default (a target proposes only such keys).
func (n *negotiator) changes(idx int) bool {
	d := &keyTable[idx]
	def := Defaults()
	switch d.kind {
	case kindAnd:
		if idx == kRDMAExtensions {
			return !n.traditional // RFC 7145 section 6.3: only a node that supports it offers it
		}
		return !*d.flag(&n.offer) && *d.flag(&def)
	case kindOr:
		return *d.flag(&n.offer) && !*d.flag(&def)
	case kindMin:
		return d.num != nil && *d.num(&n.offer) < *d.num(&def)
	case kindMax:
		return d.num != nil && *d.num(&n.offer) > *d.num(&def)
	}
	return false
}

// outstanding names a proposal of ours still waiting for its answer, or
// returns "".
func (n *negotiator) outstanding() string {
	for i := range n.st {
		if n.st[i].pending {
			return kv(keyTable[i].name, n.st[i].proposal)
		}
	}
	return ""
}

// finish checks the integrity rules once all keys are known (section 6.2:
// "An iSCSI target MUST perform integrity checking before the new
// parameters take effect") and derives the MaxRecvDataSegmentLength values
// of an iSER session (RFC 7145 section 6.2).
func (n *negotiator) finish() *negError {
	if !n.discovery && n.res.FirstBurstLength > n.res.MaxBurstLength {
		return nerr(StatusInitiatorError, "FirstBurstLength=%d exceeds MaxBurstLength=%d (section 13.14)", n.res.FirstBurstLength, n.res.MaxBurstLength)
	}
	if n.res.RDMAExtensions {
		recv, peer := n.res.TargetRecvDataSegmentLength, n.res.InitiatorRecvDataSegmentLength
		if n.role == roleInitiator {
			recv, peer = peer, recv
		}
		n.res.MaxRecvDataSegmentLength, n.res.PeerMaxRecvDataSegmentLength = recv, peer
	}
	return nil
}
