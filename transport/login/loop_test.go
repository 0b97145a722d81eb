package login

import (
	"errors"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// TestLoop runs an Initiator against a Target in memory, shuttling PDUs,
// for Normal and Discovery sessions, with and without CHAP, and for every
// rejection the initiator's configuration can provoke.
func TestLoop(t *testing.T) {
	type tc struct {
		name   string
		init   func(*InitiatorConfig)
		policy *TargetPolicy
		target func(*TargetConfig)
		status Status // expected target failure; 0: success
		ierr   error  // expected initiator-side error (errors.Is)
		words  []string
		check  func(t *testing.T, ir, tr Result, log []exchange)
	}
	tests := []tc{
		{name: "normal/none"},
		{name: "normal/one-way CHAP", init: func(c *InitiatorConfig) { c.CHAP = oneWay },
			policy: &TargetPolicy{CHAP: oneWay}},
		{name: "normal/mutual CHAP", init: func(c *InitiatorConfig) { c.CHAP = mutual },
			policy: &TargetPolicy{CHAP: mutual}},
		{name: "normal/target has mutual, initiator one-way", init: func(c *InitiatorConfig) { c.CHAP = oneWay },
			policy: &TargetPolicy{CHAP: mutual}},
		{name: "normal/CHAP offered, target needs none", init: func(c *InitiatorConfig) { c.CHAP = oneWay },
			check: func(t *testing.T, ir, tr Result, log []exchange) {
				if v, _ := pairValue(decodeResp(t, log[0].resp).pairs, "AuthMethod"); v != "None" {
					t.Errorf("AuthMethod answer %q, want None", v)
				}
			}},
		{name: "normal/wrong secret", init: func(c *InitiatorConfig) { c.CHAP = &CHAP{User: "host1", Secret: "wrong-secret-0000"} },
			policy: &TargetPolicy{CHAP: oneWay}, status: StatusAuthFailure, words: []string{"CHAP_R", "host1"}},
		{name: "normal/wrong user", init: func(c *InitiatorConfig) { c.CHAP = &CHAP{User: "mallory", Secret: oneWay.Secret} },
			policy: &TargetPolicy{CHAP: oneWay}, status: StatusAuthFailure, words: []string{`CHAP_N="mallory"`}},
		{name: "normal/mutual, wrong target secret", init: func(c *InitiatorConfig) { c.CHAP = mutual },
			policy: &TargetPolicy{CHAP: &CHAP{User: mutual.User, Secret: mutual.Secret, MutualUser: "disk1", MutualSecret: "not-the-secret-99"}},
			ierr:   ErrTargetAuthentication, words: []string{"CHAP_R"}},
		{name: "normal/mutual, wrong target name", init: func(c *InitiatorConfig) { c.CHAP = mutual },
			policy: &TargetPolicy{CHAP: &CHAP{User: mutual.User, Secret: mutual.Secret, MutualUser: "disk9", MutualSecret: mutual.MutualSecret}},
			ierr:   ErrTargetAuthentication, words: []string{`CHAP_N="disk9"`}},
		{name: "normal/mutual, target without mutual credentials", init: func(c *InitiatorConfig) { c.CHAP = mutual },
			policy: &TargetPolicy{CHAP: oneWay}, status: StatusAuthFailure, words: []string{"mutual"}},
		{name: "normal/CHAP required, initiator has none", policy: &TargetPolicy{CHAP: oneWay},
			status: StatusAuthFailure, words: []string{"skipped SecurityNegotiation"}},
		{name: "normal/mutual initiator, target needs no CHAP", init: func(c *InitiatorConfig) { c.CHAP = mutual },
			status: StatusAuthFailure, words: []string{"AuthMethod=\"CHAP\""}},
		{name: "normal/unknown target", init: func(c *InitiatorConfig) { c.TargetName = "iqn.2024-01.org.ddpstore:nosuch" },
			status: StatusNotFound, words: []string{"TargetName=\"iqn.2024-01.org.ddpstore:nosuch\""}},
		{name: "normal/initiator not allowed", policy: &TargetPolicy{Initiators: []string{iqnInit2}},
			status: StatusAuthorizationFailure, words: []string{iqnInit, iqnTarget}},
		{name: "normal/initiator allowed", policy: &TargetPolicy{Initiators: []string{iqnInit2, iqnInit}}},
		{name: "normal/other target", init: func(c *InitiatorConfig) { c.TargetName = iqnOther },
			check: func(t *testing.T, ir, tr Result, _ []exchange) {
				if tr.Policy == nil || tr.Policy.Name != iqnOther || ir.TargetName != iqnOther {
					t.Errorf("policy %+v", tr.Policy)
				}
			}},
		{name: "normal/target misconfigured", policy: &TargetPolicy{CHAP: &CHAP{User: "x"}},
			status: StatusTargetError, words: []string{"misconfigured"}},
		{name: "normal/no TSIH free", target: func(c *TargetConfig) { c.NewTSIH = func() uint16 { return 0 } },
			status: StatusOutOfResources},
		{name: "discovery/none", init: func(c *InitiatorConfig) { c.SessionType = SessionDiscovery; c.TargetName = "" },
			check: func(t *testing.T, ir, tr Result, _ []exchange) {
				if tr.SessionType != SessionDiscovery || ir.SessionType != SessionDiscovery || tr.Policy != nil {
					t.Errorf("session types %q %q", tr.SessionType, ir.SessionType)
				}
				if tr.Params.RDMAExtensions || ir.Params.RDMAExtensions {
					t.Error("RDMAExtensions in a Discovery session")
				}
			}},
		{name: "discovery/CHAP", init: func(c *InitiatorConfig) {
			c.SessionType, c.TargetName, c.CHAP = SessionDiscovery, "", mutual
		}, target: func(c *TargetConfig) { c.Discovery = mutual }},
		{name: "discovery/CHAP required", init: func(c *InitiatorConfig) { c.SessionType, c.TargetName = SessionDiscovery, "" },
			target: func(c *TargetConfig) { c.Discovery = oneWay }, status: StatusAuthFailure, words: []string{"Discovery"}},
		{name: "discovery/wrong secret", init: func(c *InitiatorConfig) {
			c.SessionType, c.TargetName, c.CHAP = SessionDiscovery, "", &CHAP{User: "host1", Secret: "bad-secret-12345"}
		}, target: func(c *TargetConfig) { c.Discovery = oneWay }, status: StatusAuthFailure},
		{name: "discovery/target MaxRecvDataSegmentLength", init: func(c *InitiatorConfig) {
			c.SessionType, c.TargetName = SessionDiscovery, ""
			c.Offer.MaxRecvDataSegmentLength = 16384
		}, target: func(c *TargetConfig) { c.Offer.MaxRecvDataSegmentLength = 4096 },
			check: func(t *testing.T, ir, tr Result, _ []exchange) {
				if ir.Params.PeerMaxRecvDataSegmentLength != 4096 || ir.Params.MaxRecvDataSegmentLength != 16384 ||
					tr.Params.PeerMaxRecvDataSegmentLength != 16384 || tr.Params.MaxRecvDataSegmentLength != 4096 {
					t.Errorf("MaxRecvDataSegmentLength: initiator %+v, target %+v", ir.Params, tr.Params)
				}
			}},
		{name: "normal/negotiated values", init: func(c *InitiatorConfig) {
			c.Offer.MaxBurstLength = 1 << 20
			c.Offer.FirstBurstLength = 128 << 10
			c.Offer.ImmediateData = false
			c.Offer.InitialR2T = false
			c.Offer.DefaultTime2Wait = 1
			c.Offer.DefaultTime2Retain = 60
			c.Offer.MaxOutstandingR2T = 16
			c.Offer.MaxConnections = 4
			c.Offer.DataPDUInOrder = false
			c.Offer.TargetRecvDataSegmentLength = 65536
			c.Offer.InitiatorRecvDataSegmentLength = 4096
			c.Offer.MaxOutstandingUnexpectedPDUs = 32
			c.Offer.ISERHelloRequired = true
		}, target: func(c *TargetConfig) {
			c.Offer.MaxBurstLength = 512 << 10
			c.Offer.FirstBurstLength = 256 << 10
			c.Offer.InitialR2T = false
			c.Offer.DefaultTime2Wait = 5
			c.Offer.DefaultTime2Retain = 10
			c.Offer.MaxOutstandingR2T = 8
			c.Offer.MaxConnections = 2
			c.Offer.TargetRecvDataSegmentLength = 16384
			c.Offer.MaxOutstandingUnexpectedPDUs = 8
		}, check: func(t *testing.T, ir, tr Result, _ []exchange) {
			p := ir.Params
			want := Params{MaxConnections: 2, InitialR2T: false, ImmediateData: false, MaxBurstLength: 512 << 10,
				FirstBurstLength: 128 << 10, DefaultTime2Wait: 5, DefaultTime2Retain: 10, MaxOutstandingR2T: 8,
				DataPDUInOrder: true, DataSequenceInOrder: true, RDMAExtensions: true,
				TargetRecvDataSegmentLength: 16384, InitiatorRecvDataSegmentLength: 4096,
				MaxOutstandingUnexpectedPDUs: 32, PeerMaxOutstandingUnexpectedPDUs: 8,
				MaxRecvDataSegmentLength: 4096, PeerMaxRecvDataSegmentLength: 16384, PeerMaxAHSLength: 256,
				ISERHelloRequired: true}
			if p != want {
				t.Errorf("initiator params\n%+v\nwant\n%+v", p, want)
			}
			want.MaxOutstandingUnexpectedPDUs, want.PeerMaxOutstandingUnexpectedPDUs = 8, 32
			want.MaxRecvDataSegmentLength, want.PeerMaxRecvDataSegmentLength = 16384, 4096
			if tr.Params != want {
				t.Errorf("target params\n%+v\nwant\n%+v", tr.Params, want)
			}
		}},
		{name: "normal/target proposes what the initiator accepts", target: func(c *TargetConfig) {
			c.Offer.MaxBurstLength = 65536
			c.Offer.FirstBurstLength = 8192
			c.Offer.ImmediateData = false
		}, check: func(t *testing.T, ir, tr Result, _ []exchange) {
			if ir.Params.MaxBurstLength != 65536 || ir.Params.FirstBurstLength != 8192 || ir.Params.ImmediateData ||
				tr.Params != mirror(ir.Params) {
				t.Errorf("initiator %+v\ntarget %+v", ir.Params, tr.Params)
			}
		}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			ic := initiatorCfg()
			if c.init != nil {
				c.init(ic)
			}
			tc := targetCfg(c.policy)
			if c.target != nil {
				c.target(tc)
			}
			in, tg, log, ierr, terr := runLogin(t, ic, tc)
			switch {
			case c.status != 0:
				wantStatus(t, terr, c.status, c.words...)
				// The initiator sees the same status in the response.
				wantStatus(t, ierr, c.status)
				last := decodeResp(t, log[len(log)-1].resp)
				if s := Status(uint16(last.StatusClass())<<8 | uint16(last.StatusDetail())); s != c.status || last.Transit() || last.DataSegmentLength() != 0 {
					t.Errorf("reject response status 0x%04x T=%v", uint16(s), last.Transit())
				}
			case c.ierr != nil:
				if !errors.Is(ierr, c.ierr) {
					t.Fatalf("initiator error %v, want %v", ierr, c.ierr)
				}
				var pe *ProtocolError
				if !errors.As(ierr, &pe) {
					t.Fatalf("initiator error %T, want *ProtocolError", ierr)
				}
				for _, w := range c.words {
					if !strings.Contains(pe.Reason, w) {
						t.Errorf("reason %q does not mention %q", pe.Reason, w)
					}
				}
			default:
				if ierr != nil || terr != nil {
					t.Fatalf("initiator: %v; target: %v", ierr, terr)
				}
				ir, tr := in.Result(), tg.Result()
				checkResults(t, ic, ir, tr, log)
				if c.check != nil {
					c.check(t, ir, tr, log)
				}
			}
		})
	}
}

// mirror swaps the role-relative declarative fields of p.
func mirror(p Params) Params {
	p.MaxOutstandingUnexpectedPDUs, p.PeerMaxOutstandingUnexpectedPDUs = p.PeerMaxOutstandingUnexpectedPDUs, p.MaxOutstandingUnexpectedPDUs
	p.MaxRecvDataSegmentLength, p.PeerMaxRecvDataSegmentLength = p.PeerMaxRecvDataSegmentLength, p.MaxRecvDataSegmentLength
	return p
}

// checkResults checks what both sides agree on after a successful login.
func checkResults(t *testing.T, ic *InitiatorConfig, ir, tr Result, log []exchange) {
	t.Helper()
	if ir.ISID != ic.ISID || tr.ISID != ic.ISID || ir.CID != ic.CID || tr.CID != ic.CID {
		t.Errorf("ISID/CID: initiator %x/%d, target %x/%d", ir.ISID, ir.CID, tr.ISID, tr.CID)
	}
	if ir.TSIH == 0 || ir.TSIH != tr.TSIH {
		t.Errorf("TSIH: initiator %d, target %d", ir.TSIH, tr.TSIH)
	}
	if ir.CmdSN != ic.CmdSN || tr.CmdSN != ic.CmdSN {
		t.Errorf("CmdSN: initiator %d, target %d, want %d", ir.CmdSN, tr.CmdSN, ic.CmdSN)
	}
	if ir.StatSN != tr.StatSN {
		t.Errorf("StatSN: initiator expects %d, target sends %d", ir.StatSN, tr.StatSN)
	}
	if ir.MaxCmdSN != tr.MaxCmdSN || tr.MaxCmdSN != ic.CmdSN+31 {
		t.Errorf("MaxCmdSN: initiator %d, target %d", ir.MaxCmdSN, tr.MaxCmdSN)
	}
	if ir.InitiatorName != tr.InitiatorName || tr.InitiatorName != ic.InitiatorName || tr.InitiatorAlias != ic.InitiatorAlias {
		t.Errorf("names: %q %q %q", ir.InitiatorName, tr.InitiatorName, tr.InitiatorAlias)
	}
	if ir.TPGT != 1 || tr.TPGT != 1 {
		t.Errorf("TPGT: %d %d", ir.TPGT, tr.TPGT)
	}
	if ir.Params != mirror(tr.Params) {
		t.Errorf("params differ:\ninitiator %+v\ntarget    %+v", ir.Params, tr.Params)
	}
	if ir.SessionType == SessionNormal && (ir.Params.RDMAExtensions == ic.Traditional || tr.Policy == nil) {
		t.Errorf("Normal session with RDMAExtensions=%v on a Traditional=%v connection, or without policy", ir.Params.RDMAExtensions, ic.Traditional)
	}
	// Every response: ISID and ITT echoed, ExpCmdSN and MaxCmdSN the
	// window, StatSN counting up, TSIH only in the Final-Response.
	for k, e := range log {
		r := decodeResp(t, e.resp)
		if r.ISID() != ic.ISID || r.ITT() != ic.ITT {
			t.Errorf("response %d: ISID %x ITT %d", k, r.ISID(), r.ITT())
		}
		if r.ExpCmdSN() != ic.CmdSN || r.MaxCmdSN() != ic.CmdSN+31 {
			t.Errorf("response %d: ExpCmdSN %d MaxCmdSN %d", k, r.ExpCmdSN(), r.MaxCmdSN())
		}
		if r.StatSN() != tr.StatSN-uint32(len(log)-k) {
			t.Errorf("response %d: StatSN %d, final next %d", k, r.StatSN(), tr.StatSN)
		}
		if final := k == len(log)-1; final != (r.TSIH() != 0) {
			t.Errorf("response %d: TSIH %d", k, r.TSIH())
		}
		if r.VersionMax() != 0 || r.VersionActive() != 0 {
			t.Errorf("response %d: versions %d %d", k, r.VersionMax(), r.VersionActive())
		}
		if k > 0 {
			q, _ := decodeReq(t, e.req)
			if q.ExpStatSN() != decodeResp(t, log[k-1].resp).StatSN()+1 {
				t.Errorf("request %d: ExpStatSN %d", k, q.ExpStatSN())
			}
		}
	}
}

// TestLoopTampered runs Initiator against Target with the first request
// changed on the way, for the rejections a well-behaved Initiator cannot
// provoke: the target's status reaches the initiator as the same
// *StatusError.
func TestLoopTampered(t *testing.T) {
	replace := func(old, new string) func(int, []byte) []byte {
		return func(k int, req []byte) []byte {
			if k != 0 {
				return req
			}
			return editText(req, func(s string) string { return strings.Replace(s, old, new, 1) })
		}
	}
	header := func(f func(iscsi.LoginReq)) func(int, []byte) []byte {
		return func(k int, req []byte) []byte {
			if k == 0 {
				f(iscsi.LoginReq{InitiatorSNs: iscsi.InitiatorSNs{BHS: iscsi.BHS(req[:iscsi.BHSLen])}})
			}
			return req
		}
	}
	for _, c := range []struct {
		name   string
		tamper func(int, []byte) []byte
		status Status
		words  []string
	}{
		{"RDMAExtensions=No", replace("RDMAExtensions=Yes", "RDMAExtensions=No"), StatusInitiatorError, []string{"RDMAExtensions=No"}},
		{"no InitiatorName", replace("InitiatorName="+iqnInit+"\n", ""), StatusMissingParameter, []string{"InitiatorName"}},
		{"no TargetName", replace("TargetName="+iqnTarget+"\n", ""), StatusMissingParameter, []string{"TargetName"}},
		{"SessionType unknown", replace("SessionType=Normal", "SessionType=Boot"), StatusSessionTypeNotSupported, []string{`SessionType="Boot"`}},
		{"malformed value", replace("MaxBurstLength=262144", "MaxBurstLength=256k"), StatusInitiatorError, []string{`MaxBurstLength="256k"`}},
		{"value out of range", replace("MaxOutstandingR2T=1", "MaxOutstandingR2T=65536"), StatusInitiatorError, []string{`MaxOutstandingR2T="65536"`}},
		{"key twice", replace("DataDigest=None", "DataDigest=None\nDataDigest=None"), StatusInitiatorError, []string{"DataDigest sent twice"}},
		{"version", header(func(r iscsi.LoginReq) { r.SetVersionMin(1); r.SetVersionMax(2) }), StatusUnsupportedVersion, nil},
		{"CSG=3", header(func(r iscsi.LoginReq) { _ = r.SetCSG(3) }), StatusInvalidDuringLogin, nil},
		{"NSG=1 from operational", header(func(r iscsi.LoginReq) { _ = r.SetNSG(1) }), StatusInvalidDuringLogin, nil},
		{"TSIH", header(func(r iscsi.LoginReq) { r.SetTSIH(77) }), StatusSessionDoesNotExist, []string{"TSIH=77"}},
		{"not a Login Request", header(func(r iscsi.LoginReq) { r.BHS[0] = 0x44 }), StatusInvalidDuringLogin, []string{"Text Request"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, log, ierr, terr := runTampered(t, initiatorCfg(), targetCfg(nil), c.tamper)
			wantStatus(t, terr, c.status, c.words...)
			wantStatus(t, ierr, c.status)
			if len(log) != 1 {
				t.Errorf("%d exchanges", len(log))
			}
		})
	}
}
