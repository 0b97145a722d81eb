package login

import (
	"errors"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// goodAnswers answer every proposal of an Initiator with Defaults().
var goodAnswers = []string{
	"RDMAExtensions=Yes", "HeaderDigest=None", "DataDigest=None", "InitialR2T=Yes", "ImmediateData=Yes",
	"MaxBurstLength=262144", "FirstBurstLength=65536", "MaxConnections=1", "MaxOutstandingR2T=1",
	"DefaultTime2Wait=2", "DefaultTime2Retain=20", "DataPDUInOrder=Yes", "DataSequenceInOrder=Yes",
	"ErrorRecoveryLevel=0", "TargetRecvDataSegmentLength=8192", "InitiatorRecvDataSegmentLength=8192",
}

// answers returns goodAnswers with changes: "Key=value" replaces or adds,
// "-Key" removes.
func answers(changes ...string) string {
	out := append([]string(nil), goodAnswers...)
	for _, c := range changes {
		key, _, _ := strings.Cut(strings.TrimPrefix(c, "-"), "=")
		i := -1
		for k, a := range out {
			if strings.HasPrefix(a, key+"=") {
				i = k
			}
		}
		switch {
		case strings.HasPrefix(c, "-"):
			out = append(out[:i], out[i+1:]...)
		case i >= 0:
			out[i] = c
		default:
			out = append(out, c)
		}
	}
	return strings.Join(out, "\n")
}

// final is a Login Final-Response to an Initiator made by initiatorCfg.
func final(text string) pdu {
	ic := initiatorCfg()
	return pdu{resp: true, csg: 1, nsg: 3, transit: true, isid: ic.ISID, itt: ic.ITT, tsih: 0x42,
		statSN: 77, expCmd: ic.CmdSN, maxCmd: ic.CmdSN + 9, text: text}
}

// TestInitiatorResponses feeds handcrafted Login Responses to an
// Initiator that skipped SecurityNegotiation and checks that it applies
// the result functions of section 13 and rejects every protocol violation.
func TestInitiatorResponses(t *testing.T) {
	tests := []struct {
		name  string
		offer func(*Params)
		cfg   func(*InitiatorConfig)
		resps []pdu
		raw   []byte
		err   error // nil: success
		words []string
		check func(t *testing.T, r Result, reqs [][]byte)
	}{
		{name: "defaults", resps: []pdu{final(answers("TargetAlias=disk one", "TargetPortalGroupTag=7"))},
			check: func(t *testing.T, r Result, _ [][]byte) {
				p := Defaults()
				p.RDMAExtensions = true
				if r.Params != p || r.TSIH != 0x42 || r.StatSN != 78 || r.MaxCmdSN != 1009 || r.TargetAlias != "disk one" || r.TPGT != 7 || r.CmdSN != 1000 {
					t.Errorf("result %+v", r)
				}
			}},
		{name: "lower values accepted", resps: []pdu{final(answers("MaxBurstLength=65536", "FirstBurstLength=4096", "DefaultTime2Wait=10",
			"InitialR2T=Yes", "ImmediateData=No", "TargetRecvDataSegmentLength=4096", "MaxOutstandingUnexpectedPDUs=4"))},
			check: func(t *testing.T, r Result, _ [][]byte) {
				p := r.Params
				if p.MaxBurstLength != 65536 || p.FirstBurstLength != 4096 || p.DefaultTime2Wait != 10 || p.ImmediateData ||
					p.TargetRecvDataSegmentLength != 4096 || p.PeerMaxRecvDataSegmentLength != 4096 || p.PeerMaxOutstandingUnexpectedPDUs != 4 {
					t.Errorf("params %+v", p)
				}
			}},
		{name: "HeaderDigest Reject keeps None", resps: []pdu{final(answers("HeaderDigest=Reject"))}},
		{name: "HeaderDigest Irrelevant", resps: []pdu{final(answers("HeaderDigest=Irrelevant", "DataDigest=Irrelevant"))}},
		{name: "iSER key not understood", resps: []pdu{final(answers("TargetRecvDataSegmentLength=NotUnderstood", "MaxOutstandingUnexpectedPDUs=NotUnderstood"))},
			check: func(t *testing.T, r Result, _ [][]byte) {
				if r.Params.TargetRecvDataSegmentLength != 8192 {
					t.Errorf("params %+v", r.Params)
				}
			}},
		{name: "unknown key in the Final-Response ignored", resps: []pdu{final(answers("X-com.example.k=1"))}},
		{name: "agreeing proposal in the Final-Response", resps: []pdu{final(answers("iSCSIProtocolLevel=1"))}},
		{name: "TargetAddress ignored", resps: []pdu{final(answers("TargetAddress=10.0.0.1:3260,1", "TargetAddress=10.0.0.2:3260,1"))}},
		{name: "optional answer outside the result function", resps: []pdu{
			with(final(answers("-MaxConnections", "DataPDUInOrder=No")), func(p *pdu) { p.transit, p.nsg, p.tsih = false, 0, 0 }),
		}, err: ErrProtocol, words: []string{`DataPDUInOrder="No"`, "OR"}},
		{name: "target proposal answered", offer: func(p *Params) { p.MaxBurstLength = 1 << 20 }, resps: []pdu{
			with(final(answers("-MaxConnections", "X-com.example.k=1", "TaskReporting=ResponseFence")), func(p *pdu) { p.transit, p.nsg, p.tsih = false, 0, 0 }),
			final("MaxConnections=1"),
		}, check: func(t *testing.T, r Result, reqs [][]byte) {
			q, ps := decodeReq(t, reqs[1])
			if !q.Transit() || q.NSG() != 3 || q.CSG() != 1 || q.ExpStatSN() != 78 {
				t.Errorf("second request CSG=%d NSG=%d T=%v ExpStatSN=%d", q.CSG(), q.NSG(), q.Transit(), q.ExpStatSN())
			}
			if v, _ := pairValue(ps, "X-com.example.k"); v != "NotUnderstood" {
				t.Errorf("second request %v", ps)
			}
			if v, _ := pairValue(ps, "TaskReporting"); v != "RFC3720" {
				// ResponseFence was proposed alone: not supported, so Reject.
				if v != "Reject" {
					t.Errorf("TaskReporting answer %q", v)
				}
			}
		}},
		{name: "C bit", resps: []pdu{
			with(final(""), func(p *pdu) {
				p.transit, p.nsg, p.cont = false, 0, true
				p.raw = []byte(strings.ReplaceAll(answers(), "\n", "\x00")[:40])
			}),
			with(final(""), func(p *pdu) { p.raw = []byte(strings.ReplaceAll(answers(), "\n", "\x00")[40:] + "\x00") }),
		}, check: func(t *testing.T, r Result, reqs [][]byte) {
			q, ps := decodeReq(t, reqs[1])
			if len(ps) != 0 || !q.Transit() || q.NSG() != 3 || q.Continue() || q.CSG() != 1 {
				t.Errorf("answer to C=1: %v T=%v", ps, q.Transit())
			}
		}},
		{name: "MaxBurstLength above offer", resps: []pdu{final(answers("MaxBurstLength=524288"))},
			err: ErrProtocol, words: []string{`MaxBurstLength="524288"`, "Minimum"}},
		{name: "DefaultTime2Wait below offer", resps: []pdu{final(answers("DefaultTime2Wait=1"))},
			err: ErrProtocol, words: []string{`DefaultTime2Wait="1"`, "Maximum"}},
		{name: "ImmediateData Yes after our No", offer: func(p *Params) { p.ImmediateData = false },
			resps: []pdu{final(answers("ImmediateData=Yes"))}, err: ErrProtocol, words: []string{"ImmediateData", "AND"}},
		{name: "InitialR2T No after our Yes", resps: []pdu{final(answers("InitialR2T=No"))},
			err: ErrProtocol, words: []string{"InitialR2T", "OR"}},
		{name: "HeaderDigest not offered", resps: []pdu{final(answers("HeaderDigest=CRC32C"))},
			err: ErrProtocol, words: []string{`HeaderDigest="CRC32C"`}},
		{name: "value out of range", resps: []pdu{final(answers("MaxOutstandingR2T=0"))},
			err: ErrProtocol, words: []string{`MaxOutstandingR2T="0"`}},
		{name: "garbage value", resps: []pdu{final(answers("MaxBurstLength=lots"))},
			err: ErrProtocol, words: []string{`MaxBurstLength="lots"`}},
		{name: "Reject of a numerical key", resps: []pdu{final(answers("MaxBurstLength=Reject"))},
			err: ErrProtocol, words: []string{"MaxBurstLength"}},
		{name: "RFC 7143 key not understood", resps: []pdu{final(answers("MaxBurstLength=NotUnderstood"))},
			err: ErrProtocol, words: []string{"MaxBurstLength", "understood"}},
		{name: "RDMAExtensions=No", resps: []pdu{final(answers("RDMAExtensions=No"))},
			err: ErrProtocol, words: []string{"RDMAExtensions"}},
		{name: "RDMAExtensions not understood", resps: []pdu{final(answers("RDMAExtensions=NotUnderstood"))},
			err: ErrProtocol, words: []string{"RDMAExtensions"}},
		{name: "answer missing", resps: []pdu{final(answers("-MaxConnections"))},
			err: ErrProtocol, words: []string{`MaxConnections="1"`, "did not answer"}},
		{name: "answered twice", resps: []pdu{final(answers() + "\nMaxConnections=1")},
			err: ErrProtocol, words: []string{"MaxConnections sent twice"}},
		{name: "unanswerable proposal in the Final-Response", resps: []pdu{final(answers("TaskReporting=FastAbort"))},
			err: ErrProtocol, words: []string{"TaskReporting", "Final-Response"}},
		{name: "initiator key from the target", resps: []pdu{final(answers("InitiatorName=" + iqnInit2))},
			err: ErrProtocol, words: []string{"InitiatorName"}},
		{name: "reserved value for an unknown key", resps: []pdu{final(answers("X-com.example.k=NotUnderstood"))},
			err: ErrProtocol, words: []string{"X-com.example.k"}},
		{name: "bad TargetPortalGroupTag", resps: []pdu{final(answers("TargetPortalGroupTag=70000"))},
			err: ErrProtocol, words: []string{`TargetPortalGroupTag="70000"`}},
		{name: "garbage text", resps: []pdu{with(final(""), func(p *pdu) { p.raw = []byte("RDMAExtensions\x00") })},
			err: ErrProtocol, words: []string{"RDMAExtensions", "malformed"}},
		{name: "TSIH 0 in the Final-Response", resps: []pdu{with(final(answers()), func(p *pdu) { p.tsih = 0 })},
			err: ErrProtocol, words: []string{"TSIH 0"}},
		{name: "wrong ExpCmdSN", resps: []pdu{with(final(answers()), func(p *pdu) { p.expCmd = 5 })},
			err: ErrProtocol, words: []string{"ExpCmdSN 5"}},
		{name: "ExpCmdSN two past the login's CmdSN", resps: []pdu{with(final(answers()), func(p *pdu) { p.expCmd = 1002 })},
			err: ErrProtocol, words: []string{"ExpCmdSN 1002", "CmdSN 1000"}},
		{name: "ExpCmdSN one before the login's CmdSN", resps: []pdu{with(final(answers()), func(p *pdu) { p.expCmd = 999 })},
			err: ErrProtocol, words: []string{"ExpCmdSN 999"}},
		// tgt 1.0.85's iSER: ExpCmdSN one past the login's CmdSN, MaxCmdSN
		// the login's CmdSN (its Final-Response said ExpCmdSN 1, MaxCmdSN 0
		// for CmdSN 0). The session starts at the login's CmdSN.
		{name: "ExpCmdSN one past the login's CmdSN (tgt's iSER)", resps: []pdu{with(final(answers()), func(p *pdu) { p.expCmd, p.maxCmd = 1001, 1000 })},
			check: func(t *testing.T, r Result, _ [][]byte) {
				if r.CmdSN != 1000 || r.MaxCmdSN != 1000 {
					t.Errorf("CmdSN %d MaxCmdSN %d, want 1000 and 1000", r.CmdSN, r.MaxCmdSN)
				}
			}},
		{name: "NSG not after CSG", resps: []pdu{with(final(answers()), func(p *pdu) { p.nsg = 1 })},
			err: ErrProtocol, words: []string{"NSG=1"}},
		{name: "NSG reserved", resps: []pdu{with(final(answers()), func(p *pdu) { p.nsg = 2 })},
			err: ErrProtocol, words: []string{"NSG=2"}},
		{name: "wrong CSG", resps: []pdu{with(final(answers()), func(p *pdu) { p.csg = 0 })},
			err: ErrProtocol, words: []string{"CSG=0"}},
		{name: "T=1 after our T=0", cfg: func(c *InitiatorConfig) { c.CHAP = oneWay }, resps: []pdu{
			with(final("AuthMethod=CHAP"), func(p *pdu) { p.transit, p.csg, p.nsg, p.tsih = false, 0, 0, 0 }),
			with(final(""), func(p *pdu) { p.csg, p.nsg, p.tsih = 0, 1, 0 }),
		}, err: ErrProtocol, words: []string{"T=1 in answer to a request with T=0"}},
		{name: "T and C", resps: []pdu{with(final(answers()), func(p *pdu) { p.cont = true })},
			err: ErrProtocol, words: []string{"T and C"}},
		{name: "wrong ITT", resps: []pdu{with(final(answers()), func(p *pdu) { p.itt = 8 })},
			err: ErrProtocol, words: []string{"Initiator Task Tag"}},
		{name: "wrong ISID", resps: []pdu{with(final(answers()), func(p *pdu) { p.isid = 1 })},
			err: ErrProtocol, words: []string{"ISID"}},
		{name: "not a Login Response", resps: []pdu{with(final(answers()), func(p *pdu) { p.opcode = iscsi.OpReject })},
			err: ErrProtocol, words: []string{"Reject"}},
		{name: "short PDU", raw: make([]byte, 47), err: ErrProtocol, words: []string{"47 octets"}},
		{name: "AHS", resps: []pdu{with(final(answers()), func(p *pdu) { p.ahs = 2 })},
			err: ErrProtocol, words: []string{"TotalAHSLength=2"}},
		{name: "lying DataSegmentLength", resps: []pdu{with(final(answers()), func(p *pdu) { p.dslExtra = 100 })},
			err: ErrProtocol, words: []string{"DataSegmentLength"}},
		{name: "Version-active 1", resps: []pdu{with(final(answers()), func(p *pdu) { p.verMin = 1 })},
			err: ErrProtocol, words: []string{"Version-active=1"}},
		{name: "too many partial responses", resps: func() []pdu {
			var r []pdu
			for range maxExchanges + 1 {
				r = append(r, with(final(""), func(p *pdu) { p.transit, p.nsg, p.tsih = false, 0, 0 }))
			}
			return r
		}(), err: ErrProtocol, words: []string{"more than 64"}},
		{name: "authorization failure", resps: []pdu{with(final(""), func(p *pdu) { p.status = StatusAuthorizationFailure; p.transit = false })},
			err: StatusAuthorizationFailure, words: []string{"Authorization failure"}},
		{name: "redirection", resps: []pdu{with(final("TargetAddress=10.1.0.45:3000"), func(p *pdu) { p.status = StatusTargetMovedTemporarily })},
			err: StatusTargetMovedTemporarily, words: []string{`TargetAddress="10.1.0.45:3000"`}},
		{name: "unallocated status", resps: []pdu{with(final(""), func(p *pdu) { p.status = 0x0377 })},
			err: Status(0x0377), words: []string{"Target error"}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			ic := initiatorCfg()
			if c.offer != nil {
				c.offer(&ic.Offer)
			}
			if c.cfg != nil {
				c.cfg(ic)
			}
			in := NewInitiator(ic)
			reqs := [][]byte{in.Start(nil)}
			resps := make([][]byte, 0, len(c.resps))
			for _, p := range c.resps {
				resps = append(resps, p.bytes())
			}
			if c.raw != nil {
				resps = [][]byte{c.raw}
			}
			var err error
			var done bool
			for k, r := range resps {
				var out []byte
				out, done, err = in.Step(nil, r)
				if done || err != nil {
					if len(out) != 0 {
						t.Errorf("done with %d octets appended", len(out))
					}
					if k != len(resps)-1 {
						t.Fatalf("response %d: done=%v err=%v", k, done, err)
					}
					break
				}
				reqs = append(reqs, out)
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
				if out, done, err := in.Step(nil, final(answers()).bytes()); len(out) != 0 || !done || !errors.Is(err, ErrFinished) {
					t.Errorf("Step after failure: %d, %v, %v", len(out), done, err)
				}
				return
			}
			if err != nil || !done {
				t.Fatalf("done=%v err=%v", done, err)
			}
			if c.check != nil {
				c.check(t, in.Result(), reqs)
			}
		})
	}
}

// TestInitiatorStart checks the first Login Request for each kind of
// login.
func TestInitiatorStart(t *testing.T) {
	tests := []struct {
		name     string
		cfg      func(*InitiatorConfig)
		csg, nsg uint8
		want     []string // key=value pairs expected, in order
		absent   []string
	}{
		{name: "normal, no CHAP", csg: 1, nsg: 3, want: append([]string{
			"InitiatorName=" + iqnInit, "InitiatorAlias=host one", "TargetName=" + iqnTarget, "SessionType=Normal"},
			append(goodAnswers[:len(goodAnswers):len(goodAnswers)], "MaxOutstandingUnexpectedPDUs=0")...),
			absent: []string{"MaxRecvDataSegmentLength", "AuthMethod", "IFMarker"}},
		{name: "normal, lower offer", cfg: func(c *InitiatorConfig) {
			c.Offer.MaxBurstLength, c.Offer.FirstBurstLength, c.Offer.ImmediateData = 4096, 512, false
		}, csg: 1, nsg: 3, want: []string{"ImmediateData=No", "MaxBurstLength=4096", "FirstBurstLength=512"}},
		{name: "normal, iSER declarations", cfg: func(c *InitiatorConfig) {
			c.Offer.ISERHelloRequired, c.Offer.TaggedBufferForSolicitedDataOnly = true, true
		}, csg: 1, nsg: 3, want: []string{"iSERHelloRequired=Yes", "TaggedBufferForSolicitedDataOnly=Yes"}},
		{name: "one-way CHAP", cfg: func(c *InitiatorConfig) { c.CHAP = oneWay; c.InitiatorAlias = "" }, csg: 0, nsg: 1,
			want:   []string{"InitiatorName=" + iqnInit, "TargetName=" + iqnTarget, "SessionType=Normal", "AuthMethod=CHAP,None"},
			absent: []string{"InitiatorAlias", "RDMAExtensions"}},
		{name: "mutual CHAP", cfg: func(c *InitiatorConfig) { c.CHAP = mutual }, csg: 0, nsg: 1, want: []string{"AuthMethod=CHAP"}},
		{name: "discovery", cfg: func(c *InitiatorConfig) { c.SessionType, c.TargetName = SessionDiscovery, "" }, csg: 1, nsg: 3,
			want:   []string{"InitiatorName=" + iqnInit, "SessionType=Discovery", "HeaderDigest=None", "DataDigest=None", "MaxRecvDataSegmentLength=8192"},
			absent: []string{"TargetName", "RDMAExtensions", "MaxBurstLength"}},
		{name: "joining a session", cfg: func(c *InitiatorConfig) { c.TSIH = 9 }, csg: 1, nsg: 3,
			want:   []string{"HeaderDigest=None", "DataDigest=None", "TargetRecvDataSegmentLength=8192", "InitiatorRecvDataSegmentLength=8192"},
			absent: []string{"RDMAExtensions", "MaxBurstLength", "MaxConnections"}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			ic := initiatorCfg()
			if c.cfg != nil {
				c.cfg(ic)
			}
			in := NewInitiator(ic)
			req := in.Start([]byte("prefix"))
			if string(req[:6]) != "prefix" {
				t.Fatal("Start overwrote dst")
			}
			q, ps := decodeReq(t, req[6:])
			if !q.Immediate() || !q.Transit() || q.Continue() || q.CSG() != c.csg || q.NSG() != c.nsg || q.VersionMax() != 0 || q.VersionMin() != 0 {
				t.Errorf("I=%v T=%v C=%v CSG=%d NSG=%d versions %d %d", q.Immediate(), q.Transit(), q.Continue(), q.CSG(), q.NSG(), q.VersionMax(), q.VersionMin())
			}
			if q.ISID() != ic.ISID || q.TSIH() != ic.TSIH || q.ITT() != ic.ITT || q.CID() != ic.CID || q.CmdSN() != ic.CmdSN || q.ExpStatSN() != ic.ExpStatSN {
				t.Errorf("header ISID %x TSIH %d ITT %d CID %d CmdSN %d", q.ISID(), q.TSIH(), q.ITT(), q.CID(), q.CmdSN())
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.key+"="+p.value)
			}
			joined := "\n" + strings.Join(got, "\n") + "\n"
			last := -1
			for _, w := range c.want {
				i := strings.Index(joined, "\n"+w+"\n")
				if i < 0 || i < last {
					t.Errorf("%q missing or out of order in\n%s", w, joined)
				}
				last = i
			}
			for _, a := range c.absent {
				if _, ok := pairValue(ps, a); ok {
					t.Errorf("%s sent", a)
				}
			}
			if out := in.Start(nil); len(out) != 0 {
				t.Error("second Start appended a request")
			}
		})
	}
}

// TestInitiatorConfig checks configuration errors: Start appends nothing
// and Step reports the error, which names the field.
func TestInitiatorConfig(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   func(*InitiatorConfig)
		words string
	}{
		{"no InitiatorName", func(c *InitiatorConfig) { c.InitiatorName = "" }, "InitiatorName"},
		{"bad InitiatorName", func(c *InitiatorConfig) { c.InitiatorName = "iqn" }, "InitiatorName"},
		{"no TargetName", func(c *InitiatorConfig) { c.TargetName = "" }, "TargetName"},
		{"bad SessionType", func(c *InitiatorConfig) { c.SessionType = "Boot" }, "SessionType"},
		{"bad alias", func(c *InitiatorConfig) { c.InitiatorAlias = "\xff" }, "InitiatorAlias"},
		{"bad CHAP", func(c *InitiatorConfig) { c.CHAP = &CHAP{User: "u"} }, "CHAP"},
		{"ISID too wide", func(c *InitiatorConfig) { c.ISID = 1 << 48 }, "ISID"},
		{"reserved ITT", func(c *InitiatorConfig) { c.ITT = 0xffffffff }, "ITT"},
		{"bad Offer", func(c *InitiatorConfig) { c.Offer.MaxBurstLength = 100 }, "MaxBurstLength"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ic := initiatorCfg()
			c.cfg(ic)
			in := NewInitiator(ic)
			if out := in.Start(nil); len(out) != 0 {
				t.Fatal("Start appended a request")
			}
			_, done, err := in.Step(nil, final(answers()).bytes())
			if !done || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.words) {
				t.Fatalf("done=%v err=%v", done, err)
			}
		})
	}
	if _, _, err := NewInitiator(initiatorCfg()).Step(nil, final(answers()).bytes()); !errors.Is(err, ErrConfig) {
		t.Errorf("Step before Start: %v", err)
	}
	if NewInitiator(nil).Start(nil) != nil {
		t.Error("nil config started")
	}
}

// TestInitiatorGolden pins the octets of the first Login Request of a
// fixed configuration, so the wire cannot drift unnoticed.
func TestInitiatorGolden(t *testing.T) {
	ic := initiatorCfg()
	ic.InitiatorAlias = ""
	req := NewInitiator(ic).Start(nil)
	const wantBHS = "" +
		"43870000" + "000001df" + "80123456" + "789a0000" + // Login, I, T=1 CSG=1 NSG=3; DSL 479; ISID; TSIH 0
		"00000007" + "00030000" + "000003e8" + "00000000" + // ITT 7; CID 3; CmdSN 1000; ExpStatSN 0
		"00000000" + "00000000" + "00000000" + "00000000"
	const wantText = "InitiatorName=iqn.2024-01.org.ddpstore:host1\x00TargetName=iqn.2024-01.org.ddpstore:disk1\x00" +
		"SessionType=Normal\x00RDMAExtensions=Yes\x00HeaderDigest=None\x00DataDigest=None\x00InitialR2T=Yes\x00" +
		"ImmediateData=Yes\x00MaxBurstLength=262144\x00FirstBurstLength=65536\x00MaxConnections=1\x00" +
		"MaxOutstandingR2T=1\x00DefaultTime2Wait=2\x00DefaultTime2Retain=20\x00DataPDUInOrder=Yes\x00" +
		"DataSequenceInOrder=Yes\x00ErrorRecoveryLevel=0\x00TargetRecvDataSegmentLength=8192\x00" +
		"InitiatorRecvDataSegmentLength=8192\x00MaxOutstandingUnexpectedPDUs=0\x00"
	if got := hexString(req[:48]); got != wantBHS {
		t.Errorf("BHS\n%s\nwant\n%s", got, wantBHS)
	}
	if got := string(req[48 : 48+len(wantText)]); got != wantText {
		t.Errorf("text\n%q\nwant\n%q", got, wantText)
	}
	if len(req) != 48+(len(wantText)+3)&^3 {
		t.Errorf("PDU of %d octets", len(req))
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
