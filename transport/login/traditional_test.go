package login

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// traditional makes both configurations Traditional (iSCSI over TCP).
func traditional(ic *InitiatorConfig, tc *TargetConfig) {
	ic.Traditional, tc.Traditional = true, true
}

// iserKeys are the keys of RFC 7145 section 6 that only iSER-assisted
// mode uses.
var iserKeys = []string{"RDMAExtensions", "TargetRecvDataSegmentLength", "InitiatorRecvDataSegmentLength",
	"MaxOutstandingUnexpectedPDUs", "MaxAHSLength", "iSERHelloRequired", "TaggedBufferForSolicitedDataOnly"}

// TestTraditionalLoop runs a Traditional Initiator against a Traditional
// Target in memory: no iSER key crosses the wire, both declare
// MaxRecvDataSegmentLength, and the digests are what section 6.2.1 makes of
// the two Offers.
func TestTraditionalLoop(t *testing.T) {
	type tc struct {
		name         string
		init         func(*InitiatorConfig)
		target       func(*TargetConfig)
		policy       *TargetPolicy
		header, data bool   // the digests both must end with (CRC32C)
		reqDigests   string // HeaderDigest of the initiator's proposal
		respDigests  string // HeaderDigest of the target's answer
		check        func(t *testing.T, ir, tr Result)
	}
	tests := []tc{
		{name: "no digests", reqDigests: "None", respDigests: "None"},
		{name: "both want CRC32C", init: func(c *InitiatorConfig) { c.Offer.HeaderDigest, c.Offer.DataDigest = true, true },
			target: func(c *TargetConfig) { c.Offer.HeaderDigest, c.Offer.DataDigest = true, true },
			header: true, data: true, reqDigests: "CRC32C,None", respDigests: "CRC32C"},
		{name: "initiator wants CRC32C, target only None", init: func(c *InitiatorConfig) { c.Offer.HeaderDigest, c.Offer.DataDigest = true, true },
			reqDigests: "CRC32C,None", respDigests: "None"},
		{name: "target wants CRC32C, initiator only None", target: func(c *TargetConfig) { c.Offer.HeaderDigest, c.Offer.DataDigest = true, true },
			reqDigests: "None", respDigests: "None"},
		{name: "header digest only", init: func(c *InitiatorConfig) { c.Offer.HeaderDigest, c.Offer.DataDigest = true, true },
			target: func(c *TargetConfig) { c.Offer.HeaderDigest = true },
			header: true, reqDigests: "CRC32C,None", respDigests: "CRC32C",
			check: func(t *testing.T, ir, tr Result) {
				if ir.Params.DataDigest || tr.Params.DataDigest {
					t.Error("DataDigest CRC32C, but the target supports only None")
				}
			}},
		{name: "mutual CHAP, then digests", init: func(c *InitiatorConfig) { c.CHAP = mutual; c.Offer.DataDigest = true },
			policy: &TargetPolicy{CHAP: mutual}, target: func(c *TargetConfig) { c.Offer.DataDigest = true },
			data: true, reqDigests: "None", respDigests: "None"},
		{name: "negotiated values", init: func(c *InitiatorConfig) {
			c.Offer.MaxBurstLength, c.Offer.FirstBurstLength = 1<<20, 128<<10
			c.Offer.ImmediateData, c.Offer.InitialR2T = false, false
			c.Offer.MaxOutstandingR2T, c.Offer.DataPDUInOrder = 16, false
			c.Offer.MaxRecvDataSegmentLength = 262144
			// iSER-only settings: not sent, not in the Result.
			c.Offer.ISERHelloRequired, c.Offer.MaxOutstandingUnexpectedPDUs = true, 32
			c.Offer.TargetRecvDataSegmentLength = 4096
		}, target: func(c *TargetConfig) {
			c.Offer.MaxBurstLength, c.Offer.FirstBurstLength = 512<<10, 256<<10
			c.Offer.InitialR2T, c.Offer.MaxOutstandingR2T = false, 8
			c.Offer.MaxRecvDataSegmentLength = 65536
			c.Offer.InitiatorRecvDataSegmentLength = 4096
		}, reqDigests: "None", respDigests: "None",
			check: func(t *testing.T, ir, tr Result) {
				want := Defaults()
				want.MaxBurstLength, want.FirstBurstLength = 512<<10, 128<<10
				want.ImmediateData, want.InitialR2T = false, false
				want.MaxOutstandingR2T = 8
				want.MaxRecvDataSegmentLength, want.PeerMaxRecvDataSegmentLength = 262144, 65536
				if ir.Params != want {
					t.Errorf("initiator params\n%+v\nwant\n%+v", ir.Params, want)
				}
			}},
		{name: "target proposes", target: func(c *TargetConfig) {
			c.Offer.MaxBurstLength, c.Offer.FirstBurstLength, c.Offer.ImmediateData = 65536, 8192, false
		}, reqDigests: "None", respDigests: "None",
			check: func(t *testing.T, ir, tr Result) {
				if ir.Params.MaxBurstLength != 65536 || ir.Params.FirstBurstLength != 8192 || ir.Params.ImmediateData {
					t.Errorf("initiator %+v", ir.Params)
				}
			}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			ic, tcfg := initiatorCfg(), targetCfg(c.policy)
			traditional(ic, tcfg)
			ic.Offer.MaxRecvDataSegmentLength = 16384
			tcfg.Offer.MaxRecvDataSegmentLength = 32768
			if c.init != nil {
				c.init(ic)
			}
			if c.target != nil {
				c.target(tcfg)
			}
			in, tg, log, ierr, terr := runLogin(t, ic, tcfg)
			if ierr != nil || terr != nil {
				t.Fatalf("initiator: %v; target: %v", ierr, terr)
			}
			ir, tr := in.Result(), tg.Result()
			checkResults(t, ic, ir, tr, log)
			for _, r := range []Result{ir, tr} {
				p := r.Params
				if p.RDMAExtensions || p.HeaderDigest != c.header || p.DataDigest != c.data || r.SessionType != SessionNormal {
					t.Errorf("RDMAExtensions=%v HeaderDigest=%v DataDigest=%v %s, want header %v data %v",
						p.RDMAExtensions, p.HeaderDigest, p.DataDigest, r.SessionType, c.header, c.data)
				}
				if p.ISERHelloRequired || p.TaggedBufferForSolicitedDataOnly || p.TaggedBufferDeclared ||
					p.PeerMaxOutstandingUnexpectedPDUs != 0 || p.PeerMaxAHSLength != 256 {
					t.Errorf("iSER settings in a traditional Result: %+v", p)
				}
			}
			if ir.Params.MaxRecvDataSegmentLength != ic.Offer.MaxRecvDataSegmentLength ||
				ir.Params.PeerMaxRecvDataSegmentLength != tcfg.Offer.MaxRecvDataSegmentLength {
				t.Errorf("MaxRecvDataSegmentLength %d, peer's %d", ir.Params.MaxRecvDataSegmentLength, ir.Params.PeerMaxRecvDataSegmentLength)
			}
			// On the wire: no iSER key either way, MaxRecvDataSegmentLength
			// declared both ways, the digests as expected.
			var reqs, resps []pair
			for _, e := range log {
				_, ps := decodeReq(t, e.req)
				reqs = append(reqs, ps...)
				resps = append(resps, decodeResp(t, e.resp).pairs...)
			}
			for _, k := range iserKeys {
				if v, ok := pairValue(reqs, k); ok {
					t.Errorf("initiator sent %s=%s", k, v)
				}
				if v, ok := pairValue(resps, k); ok {
					t.Errorf("target sent %s=%s", k, v)
				}
			}
			for _, side := range []struct {
				who      string
				ps       []pair
				mrdsl    uint32
				digests  string
				dataWant bool
			}{
				{"initiator", reqs, ic.Offer.MaxRecvDataSegmentLength, c.reqDigests, ic.Offer.DataDigest},
				{"target", resps, tcfg.Offer.MaxRecvDataSegmentLength, c.respDigests, c.data},
			} {
				if v, _ := pairValue(side.ps, "MaxRecvDataSegmentLength"); v != itoa(side.mrdsl) {
					t.Errorf("%s declared MaxRecvDataSegmentLength=%q, want %d", side.who, v, side.mrdsl)
				}
				if v, _ := pairValue(side.ps, "HeaderDigest"); v != side.digests {
					t.Errorf("%s sent HeaderDigest=%q, want %q", side.who, v, side.digests)
				}
				want := "None"
				if side.dataWant {
					want = "CRC32C"
					if side.who == "initiator" {
						want = "CRC32C,None"
					}
				}
				if v, _ := pairValue(side.ps, "DataDigest"); v != want {
					t.Errorf("%s sent DataDigest=%q, want %q", side.who, v, want)
				}
			}
			if c.check != nil {
				c.check(t, ir, tr)
			}
		})
	}
}

func itoa(n uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// TestTraditionalDiscovery checks that a Discovery session logs in the
// same way on a Traditional connection as on an iSER one, and that the
// digests of the Offer apply there too.
func TestTraditionalDiscovery(t *testing.T) {
	disc := func(ic *InitiatorConfig) { ic.SessionType, ic.TargetName = SessionDiscovery, "" }
	var results [2][2]Result
	for k, trad := range []bool{false, true} {
		ic, tcfg := initiatorCfg(), targetCfg(nil)
		disc(ic)
		ic.Traditional, tcfg.Traditional = trad, trad
		in, tg, log, ierr, terr := runLogin(t, ic, tcfg)
		if ierr != nil || terr != nil {
			t.Fatalf("Traditional=%v: initiator: %v; target: %v", trad, ierr, terr)
		}
		if len(log) != 1 {
			t.Errorf("Traditional=%v: %d exchanges", trad, len(log))
		}
		checkResults(t, ic, in.Result(), tg.Result(), log)
		results[k] = [2]Result{in.Result(), tg.Result()}
	}
	for r := range 2 {
		a, b := results[0][r], results[1][r]
		a.TSIH, b.TSIH = 0, 0
		if a.Params != b.Params || a.SessionType != SessionDiscovery || b.SessionType != SessionDiscovery {
			t.Errorf("iSER %+v\ntraditional %+v", a, b)
		}
	}

	ic, tcfg := initiatorCfg(), targetCfg(nil)
	disc(ic)
	traditional(ic, tcfg)
	ic.Offer.HeaderDigest, tcfg.Offer.HeaderDigest, tcfg.Offer.DataDigest = true, true, true
	in, tg, log, ierr, terr := runLogin(t, ic, tcfg)
	if ierr != nil || terr != nil {
		t.Fatalf("initiator: %v; target: %v", ierr, terr)
	}
	checkResults(t, ic, in.Result(), tg.Result(), log)
	if p := in.Result().Params; !p.HeaderDigest || p.DataDigest || p.RDMAExtensions {
		t.Errorf("digests %v %v, RDMAExtensions %v", p.HeaderDigest, p.DataDigest, p.RDMAExtensions)
	}
}

// TestTraditionalTargetAnswers checks a Traditional Target's answers to
// single keys (RFC 7143 sections 6.2 and 13, RFC 7145 section 6).
func TestTraditionalTargetAnswers(t *testing.T) {
	base := "InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget
	disc := "InitiatorName=" + iqnInit + "\nSessionType=Discovery"
	crc := func(p *Params) { p.HeaderDigest, p.DataDigest = true, true }
	tests := []struct {
		name  string
		first string
		offer func(*Params)
		key   string
		want  string // "" = no answer expected
	}{
		{"RDMAExtensions=Yes answered No", base, nil, "RDMAExtensions=Yes", "No"},
		{"RDMAExtensions=No agreed", base, nil, "RDMAExtensions=No", "No"},
		{"RDMAExtensions in Discovery", disc, nil, "RDMAExtensions=Yes", "Irrelevant"},
		{"HeaderDigest CRC32C chosen", base, crc, "HeaderDigest=CRC32C,None", "CRC32C"},
		{"HeaderDigest None, ours only None", base, nil, "HeaderDigest=CRC32C,None", "None"},
		{"HeaderDigest proposer prefers None", base, crc, "HeaderDigest=None,CRC32C", "None"},
		{"HeaderDigest CRC32C only, ours only None", base, nil, "HeaderDigest=CRC32C", "Reject"},
		{"DataDigest CRC32C only", base, crc, "DataDigest=CRC32C", "CRC32C"},
		{"DataDigest unknown digest skipped", base, crc, "DataDigest=Y-com.example.d,CRC32C", "CRC32C"},
		{"DataDigest unknown only", base, crc, "DataDigest=Y-com.example.d", "Reject"},
		{"DataDigest in Discovery", disc, crc, "DataDigest=CRC32C,None", "CRC32C"},
		{"TargetRecvDataSegmentLength", base, nil, "TargetRecvDataSegmentLength=262144", "Irrelevant"},
		{"InitiatorRecvDataSegmentLength", base, nil, "InitiatorRecvDataSegmentLength=262144", "Irrelevant"},
		{"MaxOutstandingUnexpectedPDUs not declared back", base, func(p *Params) { p.MaxOutstandingUnexpectedPDUs = 16 }, "MaxOutstandingUnexpectedPDUs=0", ""},
		{"MaxAHSLength", base, nil, "MaxAHSLength=0", ""},
		{"iSERHelloRequired", base, nil, "iSERHelloRequired=Yes", ""},
		{"TaggedBufferForSolicitedDataOnly", base, nil, "TaggedBufferForSolicitedDataOnly=Yes", ""},
		{"MaxRecvDataSegmentLength declared", base, func(p *Params) { p.MaxRecvDataSegmentLength = 65536 }, "MaxRecvDataSegmentLength=4096", "65536"},
		{"IFMarker", base, nil, "IFMarker=No", "Reject"},
		{"OFMarkInt", base, nil, "OFMarkInt=1~65535", "Reject"},
		{"MaxBurstLength min", base, nil, "MaxBurstLength=1048576", "262144"},
		{"ImmediateData AND", base, func(p *Params) { p.ImmediateData = false }, "ImmediateData=Yes", "No"},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			cfg := targetCfg(nil)
			cfg.Traditional = true
			if c.offer != nil {
				c.offer(&cfg.Offer)
			}
			tg := NewTarget(cfg)
			resp, done, err := tg.Step(nil, op(c.first+"\n"+c.key).bytes())
			if err != nil || !done {
				t.Fatalf("done=%v err=%v", done, err)
			}
			r := decodeResp(t, resp)
			key, _, _ := strings.Cut(c.key, "=")
			got, ok := r.get(key)
			if c.want == "" {
				if ok {
					t.Fatalf("unexpected answer %s=%s", key, got)
				}
			} else if got != c.want {
				t.Fatalf("answer %s=%q, want %q\n%s", key, got, c.want, r.text())
			}
			res := tg.Result()
			if res.Params.RDMAExtensions {
				t.Error("RDMAExtensions in a traditional Result")
			}
			if c.first == base {
				if v, ok := r.get("RDMAExtensions"); ok && key != "RDMAExtensions" {
					t.Errorf("the target offered RDMAExtensions=%s", v)
				}
				if _, ok := r.get("MaxRecvDataSegmentLength"); !ok {
					t.Errorf("MaxRecvDataSegmentLength not declared:\n%s", r.text())
				}
			}
		})
	}
}

// TestTraditionalTargetISERInitiator logs an iSER initiator in to a
// Traditional Target: it proposes RDMAExtensions=Yes and the iSER keys, as
// Linux's ib_iser does, gets RDMAExtensions=No (RFC 7145 section 6.3) and
// the iSER keys Irrelevant or ignored, and the session is a traditional
// one. Our own Initiator, which requires iSER, then ends the login with
// the existing reason.
func TestTraditionalTargetISERInitiator(t *testing.T) {
	cfg := targetCfg(nil)
	cfg.Traditional = true
	cfg.Offer.MaxRecvDataSegmentLength = 65536
	tg := NewTarget(cfg)
	req := op(opBase + "\nHeaderDigest=None\nDataDigest=None\nMaxRecvDataSegmentLength=262144" +
		"\nTargetRecvDataSegmentLength=262144\nInitiatorRecvDataSegmentLength=262144" +
		"\nMaxOutstandingUnexpectedPDUs=8\nMaxAHSLength=0\niSERHelloRequired=Yes\nTaggedBufferForSolicitedDataOnly=Yes")
	resp, done, err := tg.Step(nil, req.bytes())
	if err != nil || !done {
		t.Fatalf("done=%v err=%v", done, err)
	}
	r := decodeResp(t, resp)
	if !r.Transit() || r.NSG() != StageFullFeature || r.TSIH() == 0 {
		t.Fatalf("T=%v NSG=%d TSIH %d", r.Transit(), r.NSG(), r.TSIH())
	}
	for key, want := range map[string]string{
		"RDMAExtensions": "No", "HeaderDigest": "None", "DataDigest": "None", "MaxRecvDataSegmentLength": "65536",
		"TargetRecvDataSegmentLength": "Irrelevant", "InitiatorRecvDataSegmentLength": "Irrelevant",
	} {
		if got, _ := r.get(key); got != want {
			t.Errorf("%s=%q, want %q\n%s", key, got, want, r.text())
		}
	}
	for _, key := range []string{"MaxOutstandingUnexpectedPDUs", "MaxAHSLength", "iSERHelloRequired", "TaggedBufferForSolicitedDataOnly"} {
		if v, ok := r.get(key); ok {
			t.Errorf("answered %s=%s", key, v)
		}
	}
	res := tg.Result()
	want := Defaults()
	want.MaxRecvDataSegmentLength, want.PeerMaxRecvDataSegmentLength = 65536, 262144
	if res.SessionType != SessionNormal || res.Policy == nil || res.Params != want {
		t.Errorf("result %s policy %v\n%+v\nwant\n%+v", res.SessionType, res.Policy, res.Params, want)
	}

	ic, tcfg := initiatorCfg(), targetCfg(nil)
	tcfg.Traditional = true
	_, _, log, ierr, terr := runLogin(t, ic, tcfg)
	if terr != nil || len(log) != 1 {
		t.Fatalf("target: %v after %d exchanges", terr, len(log))
	}
	var pe *ProtocolError
	if !errors.As(ierr, &pe) || !strings.Contains(pe.Reason, "the target refused RDMAExtensions=Yes: iSER-assisted mode is required") {
		t.Fatalf("initiator error %v", ierr)
	}
}

// TestTraditionalInitiatorISERTarget logs a Traditional Initiator in to an
// iSER-only Target: the target offers RDMAExtensions=Yes, the initiator
// answers No, and the target ends the login with the reason it has always
// given.
func TestTraditionalInitiatorISERTarget(t *testing.T) {
	for _, chap := range []bool{false, true} {
		ic, tcfg := initiatorCfg(), targetCfg(nil)
		ic.Traditional = true
		if chap {
			ic.CHAP, tcfg = oneWay, targetCfg(&TargetPolicy{CHAP: oneWay})
		}
		_, _, log, ierr, terr := runLogin(t, ic, tcfg)
		wantStatus(t, terr, StatusInitiatorError, "RDMAExtensions=No: this target serves iSER-assisted mode only")
		wantStatus(t, ierr, StatusInitiatorError)
		n := len(log)
		if n < 2 {
			t.Fatalf("CHAP=%v: %d exchanges", chap, n)
		}
		if v, _ := pairValue(decodeResp(t, log[n-2].resp).pairs, "RDMAExtensions"); v != "Yes" {
			t.Errorf("CHAP=%v: the target did not offer RDMAExtensions=Yes", chap)
		}
		if _, ps := decodeReq(t, log[n-1].req); len(ps) != 1 || ps[0] != (pair{"RDMAExtensions", "No"}) {
			t.Errorf("CHAP=%v: answer %v, want RDMAExtensions=No alone", chap, ps)
		}
		if _, ps := decodeReq(t, log[n-2].req); !chap {
			if v, ok := pairValue(ps, "RDMAExtensions"); ok {
				t.Errorf("the initiator proposed RDMAExtensions=%s", v)
			}
		}
	}
}

// TestTraditionalInitiatorStart pins the first Login Request of a
// Traditional Initiator: the operational keys of RFC 7143 and its
// MaxRecvDataSegmentLength, the digests as its Offer says, no iSER key.
func TestTraditionalInitiatorStart(t *testing.T) {
	ic := initiatorCfg()
	ic.InitiatorAlias, ic.Traditional = "", true
	ic.Offer.DataDigest = true
	ic.Offer.ISERHelloRequired, ic.Offer.TaggedBufferForSolicitedDataOnly = true, true
	req := NewInitiator(ic).Start(nil)
	const wantText = "InitiatorName=iqn.2024-01.org.ddpstore:host1\x00TargetName=iqn.2024-01.org.ddpstore:disk1\x00" +
		"SessionType=Normal\x00HeaderDigest=None\x00DataDigest=CRC32C,None\x00InitialR2T=Yes\x00" +
		"ImmediateData=Yes\x00MaxBurstLength=262144\x00FirstBurstLength=65536\x00MaxConnections=1\x00" +
		"MaxOutstandingR2T=1\x00DefaultTime2Wait=2\x00DefaultTime2Retain=20\x00DataPDUInOrder=Yes\x00" +
		"DataSequenceInOrder=Yes\x00ErrorRecoveryLevel=0\x00MaxRecvDataSegmentLength=8192\x00"
	q, _ := decodeReq(t, req)
	if got := string(req[48 : 48+q.DataSegmentLength()]); got != wantText {
		t.Errorf("text\n%q\nwant\n%q", got, wantText)
	}
	if !q.Transit() || q.CSG() != StageOperational || q.NSG() != StageFullFeature {
		t.Errorf("T=%v CSG=%d NSG=%d", q.Transit(), q.CSG(), q.NSG())
	}

	// Joining a session: digests and MaxRecvDataSegmentLength only.
	ic.TSIH = 9
	_, ps := decodeReq(t, NewInitiator(ic).Start(nil))
	var got []string
	for _, p := range ps[3:] {
		got = append(got, p.key+"="+p.value)
	}
	if want := "HeaderDigest=None DataDigest=CRC32C,None MaxRecvDataSegmentLength=8192"; strings.Join(got, " ") != want {
		t.Errorf("joining: %q, want %q", strings.Join(got, " "), want)
	}
}

// TestTraditionalInitiatorResponses feeds handcrafted Login Responses to
// a Traditional Initiator.
func TestTraditionalInitiatorResponses(t *testing.T) {
	base := []string{"HeaderDigest=None", "DataDigest=None", "InitialR2T=Yes", "ImmediateData=Yes",
		"MaxBurstLength=262144", "FirstBurstLength=65536", "MaxConnections=1", "MaxOutstandingR2T=1",
		"DefaultTime2Wait=2", "DefaultTime2Retain=20", "DataPDUInOrder=Yes", "DataSequenceInOrder=Yes",
		"ErrorRecoveryLevel=0"}
	text := func(extra ...string) string {
		return strings.Join(append(append([]string(nil), base...), extra...), "\n")
	}
	replace := func(old, new string) string { return strings.Replace(text(), old, new, 1) }
	tests := []struct {
		name  string
		offer func(*Params)
		resps []pdu
		next  []pair // the request after each response but the last
		err   error
		words []string
		check func(t *testing.T, r Result)
	}{
		{name: "defaults, target declares", resps: []pdu{final(text("MaxRecvDataSegmentLength=4096"))},
			check: func(t *testing.T, r Result) {
				want := Defaults()
				want.PeerMaxRecvDataSegmentLength = 4096
				if r.Params != want {
					t.Errorf("params %+v", r.Params)
				}
			}},
		{name: "no declaration: default 8192", resps: []pdu{final(text())},
			check: func(t *testing.T, r Result) {
				if r.Params.PeerMaxRecvDataSegmentLength != 8192 || r.Params.RDMAExtensions {
					t.Errorf("params %+v", r.Params)
				}
			}},
		{name: "CRC32C chosen", offer: func(p *Params) { p.HeaderDigest, p.DataDigest = true, true },
			resps: []pdu{final(strings.Replace(replace("HeaderDigest=None", "HeaderDigest=CRC32C"), "DataDigest=None", "DataDigest=CRC32C", 1))},
			check: func(t *testing.T, r Result) {
				if !r.Params.HeaderDigest || !r.Params.DataDigest {
					t.Errorf("params %+v", r.Params)
				}
			}},
		{name: "None chosen from CRC32C,None", offer: func(p *Params) { p.HeaderDigest, p.DataDigest = true, true },
			resps: []pdu{final(text())},
			check: func(t *testing.T, r Result) {
				if r.Params.HeaderDigest || r.Params.DataDigest {
					t.Errorf("params %+v", r.Params)
				}
			}},
		{name: "digest Reject keeps None", offer: func(p *Params) { p.HeaderDigest = true },
			resps: []pdu{final(replace("HeaderDigest=None", "HeaderDigest=Reject"))},
			check: func(t *testing.T, r Result) {
				if r.Params.HeaderDigest {
					t.Errorf("params %+v", r.Params)
				}
			}},
		{name: "CRC32C not offered", resps: []pdu{final(replace("DataDigest=None", "DataDigest=CRC32C"))},
			err: ErrProtocol, words: []string{`DataDigest="CRC32C"`, "not one of the offered values"}},
		{name: "target offers RDMAExtensions", resps: []pdu{
			{resp: true, csg: 1, isid: initiatorCfg().ISID, itt: initiatorCfg().ITT, statSN: 76, expCmd: 1000, maxCmd: 1009,
				text: text("RDMAExtensions=Yes")},
			final(""),
		}, next: []pair{{"RDMAExtensions", "No"}}, check: func(t *testing.T, r Result) {
			if r.Params.RDMAExtensions {
				t.Error("RDMAExtensions=Yes in the Result")
			}
		}},
		{name: "RDMAExtensions in the Final-Response", resps: []pdu{final(text("RDMAExtensions=Yes"))},
			err: ErrProtocol, words: []string{"RDMAExtensions"}},
		{name: "iSER key proposed", resps: []pdu{
			{resp: true, csg: 1, isid: initiatorCfg().ISID, itt: initiatorCfg().ITT, statSN: 76, expCmd: 1000, maxCmd: 1009,
				text: text("TargetRecvDataSegmentLength=4096")},
			final(""),
		}, next: []pair{{"TargetRecvDataSegmentLength", "Irrelevant"}}, check: func(t *testing.T, r Result) {
			if r.Params.TargetRecvDataSegmentLength != 8192 {
				t.Errorf("params %+v", r.Params)
			}
		}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			ic := initiatorCfg()
			ic.Traditional = true
			if c.offer != nil {
				c.offer(&ic.Offer)
			}
			in := NewInitiator(ic)
			in.Start(nil)
			var err error
			var done bool
			var out []byte
			for k, p := range c.resps {
				out, done, err = in.Step(nil, p.bytes())
				if done || err != nil {
					if k != len(c.resps)-1 {
						t.Fatalf("response %d: done=%v err=%v", k, done, err)
					}
					break
				}
				if _, ps := decodeReq(t, out); !slices.Equal(ps, c.next) {
					t.Errorf("request %d: %v, want %v", k+1, ps, c.next)
				}
			}
			if c.err != nil {
				if !errors.Is(err, c.err) || !done {
					t.Fatalf("error %v (done=%v), want %v", err, done, c.err)
				}
				for _, w := range c.words {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil || !done {
				t.Fatalf("done=%v err=%v", done, err)
			}
			c.check(t, in.Result())
		})
	}
}
