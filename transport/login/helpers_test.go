package login

import (
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// Names and credentials shared by the tests.
const (
	iqnInit   = "iqn.2024-01.org.ddpstore:host1"
	iqnInit2  = "iqn.2024-01.org.ddpstore:host2"
	iqnTarget = "iqn.2024-01.org.ddpstore:disk1"
	iqnOther  = "iqn.2024-01.org.ddpstore:disk2"
)

// fixedRand is a reproducible random source for CHAP.
func fixedRand(seed uint64) io.Reader {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
	return rand.NewChaCha8(s)
}

var (
	oneWay = &CHAP{User: "host1", Secret: "initiator-secret-123"}
	mutual = &CHAP{User: "host1", Secret: "initiator-secret-123", MutualUser: "disk1", MutualSecret: "target-secret-4567"}
)

// targetCfg returns a target configuration with two targets: iqnTarget
// (policy p) and iqnOther (anyone, no CHAP).
func targetCfg(p *TargetPolicy) *TargetConfig {
	if p == nil {
		p = &TargetPolicy{}
	}
	p.Name = iqnTarget
	other := &TargetPolicy{Name: iqnOther}
	var tsih uint16 = 0x100
	return &TargetConfig{
		Lookup: func(name string) *TargetPolicy {
			switch name {
			case iqnTarget:
				return p
			case iqnOther:
				return other
			}
			return nil
		},
		Offer:      Defaults(),
		QueueDepth: 32,
		TPGT:       1,
		Rand:       fixedRand(1),
		NewTSIH:    func() uint16 { tsih++; return tsih },
	}
}

func initiatorCfg() *InitiatorConfig {
	return &InitiatorConfig{
		InitiatorName:  iqnInit,
		InitiatorAlias: "host one",
		TargetName:     iqnTarget,
		Offer:          Defaults(),
		ISID:           0x80_1234_5678_9a,
		CmdSN:          1000,
		ITT:            7,
		CID:            3,
		Rand:           fixedRand(2),
	}
}

// exchange is one request/response pair of a login transcript.
type exchange struct{ req, resp []byte }

// runLogin shuttles PDUs between an Initiator and a Target until one side
// is done, and returns the transcript and both errors.
func runLogin(t *testing.T, ic *InitiatorConfig, tc *TargetConfig) (*Initiator, *Target, []exchange, error, error) {
	t.Helper()
	return runTampered(t, ic, tc, nil)
}

// runTampered is runLogin with a man in the middle that may change the
// k-th request on its way to the target.
func runTampered(t *testing.T, ic *InitiatorConfig, tc *TargetConfig, tamper func(k int, req []byte) []byte) (*Initiator, *Target, []exchange, error, error) {
	t.Helper()
	in, tg := NewInitiator(ic), NewTarget(tc)
	req := in.Start(nil)
	if len(req) == 0 {
		t.Fatal("Start appended nothing")
	}
	var log []exchange
	for k := range maxExchanges + 2 {
		if tamper != nil {
			req = tamper(k, req)
		}
		resp, tdone, terr := tg.Step(nil, req)
		checkResponse(t, resp)
		log = append(log, exchange{req, resp})
		next, idone, ierr := in.Step(nil, resp)
		if terr != nil || ierr != nil {
			return in, tg, log, ierr, terr
		}
		if idone || tdone {
			if idone != tdone {
				t.Fatalf("initiator done=%v, target done=%v", idone, tdone)
			}
			if len(next) != 0 {
				t.Fatalf("initiator appended %d octets after done", len(next))
			}
			return in, tg, log, nil, nil
		}
		req = next
	}
	t.Fatal("login did not end")
	return nil, nil, nil, nil, nil
}

// checkResponse checks that resp is exactly one well-formed Login
// Response whose text parses.
func checkResponse(t testing.TB, resp []byte) {
	t.Helper()
	b, err := iscsi.Parse(resp)
	if err != nil {
		t.Fatalf("response does not parse: %v", err)
	}
	if b.Opcode() != iscsi.OpLoginResp {
		t.Fatalf("response opcode %v", b.Opcode())
	}
	if b.PDULen() != len(resp) {
		t.Fatalf("response of %d octets, PDULen %d", len(resp), b.PDULen())
	}
	if b.DataSegmentLength() > MaxSegment {
		t.Fatalf("response data segment of %d octets", b.DataSegmentLength())
	}
	if _, err := parsePairs(resp[iscsi.BHSLen : iscsi.BHSLen+int(b.DataSegmentLength())]); err != nil {
		t.Fatalf("response text: %v", err)
	}
}

// pdu describes a Login Request (or, with resp set, a Login Response) for
// the table tests.
type pdu struct {
	csg, nsg       uint8
	transit, cont  bool
	isid           uint64
	tsih           uint16
	itt            uint32
	cid            uint16
	cmdSN, statSN  uint32 // CmdSN and ExpStatSN of a request; StatSN of a response
	expCmd, maxCmd uint32 // ExpCmdSN and MaxCmdSN of a response
	verMax, verMin uint8
	status         Status
	text           string // key=value pairs separated by '\n', NUL-terminated on the wire
	raw            []byte // text as is, instead of text
	resp           bool
	opcode         iscsi.Opcode // overrides the opcode when non-zero
	ahs            uint8
	dslExtra       int // added to DataSegmentLength (lying lengths)
}

func textBytes(s string) []byte {
	if s == "" {
		return nil
	}
	var b []byte
	for _, kv := range strings.Split(s, "\n") {
		b = append(b, kv...)
		b = append(b, 0)
	}
	return b
}

func (p pdu) bytes() []byte {
	b := make([]byte, iscsi.BHSLen)
	var h iscsi.BHS
	if p.resp {
		r, _ := iscsi.NewLoginResp(b)
		r.SetTransit(p.transit)
		r.SetContinue(p.cont)
		_ = r.SetCSG(p.csg)
		_ = r.SetNSG(p.nsg)
		_ = r.SetISID(p.isid)
		r.SetTSIH(p.tsih)
		r.SetStatSN(p.statSN)
		r.SetExpCmdSN(p.expCmd)
		r.SetMaxCmdSN(p.maxCmd)
		r.SetVersionMax(p.verMax)
		r.SetVersionActive(p.verMin)
		r.SetStatusClass(p.status.Class())
		r.SetStatusDetail(p.status.Detail())
		h = r.BHS
	} else {
		r, _ := iscsi.NewLoginReq(b)
		r.SetTransit(p.transit)
		r.SetContinue(p.cont)
		_ = r.SetCSG(p.csg)
		_ = r.SetNSG(p.nsg)
		_ = r.SetISID(p.isid)
		r.SetTSIH(p.tsih)
		r.SetCID(p.cid)
		r.SetCmdSN(p.cmdSN)
		r.SetExpStatSN(p.statSN)
		r.SetVersionMax(p.verMax)
		r.SetVersionMin(p.verMin)
		h = r.BHS
	}
	h.SetITT(p.itt)
	if p.opcode != 0 {
		b[0] = b[0]&0xc0 | uint8(p.opcode)
	}
	h.SetTotalAHSLength(p.ahs)
	data := p.raw
	if data == nil {
		data = textBytes(p.text)
	}
	_ = h.SetDataSegmentLength(uint32(len(data) + p.dslExtra))
	return iscsi.PadText(append(b, data...))
}

// respInfo is a decoded Login Response.
type respInfo struct {
	iscsi.LoginResp
	pairs []pair
}

func decodeResp(t testing.TB, b []byte) respInfo {
	t.Helper()
	checkResponse(t, b)
	r, _ := iscsi.AsLoginResp(iscsi.BHS(b[:iscsi.BHSLen]))
	ps, _ := parsePairs(b[iscsi.BHSLen : iscsi.BHSLen+int(r.DataSegmentLength())])
	return respInfo{r, ps}
}

func (r respInfo) get(key string) (string, bool) {
	for _, p := range r.pairs {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

func (r respInfo) text() string {
	var s []string
	for _, p := range r.pairs {
		s = append(s, p.key+"="+p.value)
	}
	return strings.Join(s, "\n")
}

// decodeReq decodes a Login Request and its text.
func decodeReq(t testing.TB, b []byte) (iscsi.LoginReq, []pair) {
	t.Helper()
	h, err := iscsi.Parse(b)
	if err != nil {
		t.Fatalf("request does not parse: %v", err)
	}
	if h.Opcode() != iscsi.OpLoginReq || h.PDULen() != len(b) {
		t.Fatalf("not one Login Request: %v %v %d/%d", err, h.Opcode(), h.PDULen(), len(b))
	}
	r, _ := iscsi.AsLoginReq(h)
	ps, err := parsePairs(b[iscsi.BHSLen : iscsi.BHSLen+int(h.DataSegmentLength())])
	if err != nil {
		t.Fatalf("request text: %v", err)
	}
	return r, ps
}

func pairValue(ps []pair, key string) (string, bool) {
	for _, p := range ps {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

// wantStatus checks that err is a *StatusError with status s whose reason
// contains every one of words.
func wantStatus(t *testing.T, err error, s Status, words ...string) {
	t.Helper()
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T), want status 0x%04x", err, err, uint16(s))
	}
	if se.Status() != s || !errors.Is(err, s) {
		t.Fatalf("status 0x%04x (%v), want 0x%04x", uint16(se.Status()), err, uint16(s))
	}
	for _, w := range words {
		if !strings.Contains(se.Reason, w) {
			t.Errorf("reason %q does not mention %q", se.Reason, w)
		}
	}
}

// editText rewrites the text of a Login Request ('\n' separates the
// pairs in what edit sees) and fixes its DataSegmentLength and padding.
func editText(req []byte, edit func(string) string) []byte {
	h := iscsi.BHS(req[:iscsi.BHSLen])
	text := string(req[iscsi.BHSLen : iscsi.BHSLen+int(h.DataSegmentLength())])
	text = strings.ReplaceAll(strings.TrimSuffix(text, "\x00"), "\x00", "\n")
	out := append([]byte(nil), req[:iscsi.BHSLen]...)
	data := textBytes(edit(text))
	_ = iscsi.BHS(out).SetDataSegmentLength(uint32(len(data)))
	return iscsi.PadText(append(out, data...))
}
