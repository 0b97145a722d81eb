package login

import (
	"errors"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

const (
	tISID  = 0x40_0001_0002_03
	tITT   = 5
	tCID   = 9
	tCmdSN = 10
)

const opBase = "InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nRDMAExtensions=Yes"

// op is a LoginOperationalNegotiation request asking for the Full Feature
// Phase; sec a SecurityNegotiation request asking for
// LoginOperationalNegotiation.
func op(text string) pdu {
	return pdu{csg: 1, nsg: 3, transit: true, isid: tISID, itt: tITT, cid: tCID, cmdSN: tCmdSN, statSN: 100, text: text}
}

func sec(text string) pdu {
	p := op(text)
	p.csg, p.nsg = 0, 1
	return p
}

func with(p pdu, f func(*pdu)) pdu { f(&p); return p }

func cont(p pdu) pdu { p.transit, p.cont = false, true; return p }

func noT(p pdu) pdu { p.transit = false; p.nsg = 0; return p }

// TestTargetRejects feeds Login Requests to a Target and checks the status
// of the response to the last one, and that the reason names the key and
// value at fault.
func TestTargetRejects(t *testing.T) {
	long := strings.Repeat("x", 256)
	unknown := make([]string, 0, 400)
	for i := range 400 {
		unknown = append(unknown, "X-org.example.key"+strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("z", i/26)+"=1")
	}
	tests := []struct {
		name   string
		policy *TargetPolicy
		cfg    func(*TargetConfig)
		reqs   []pdu
		raw    []byte // sent alone instead of reqs
		status Status
		words  []string
	}{
		{name: "version-min 1", reqs: []pdu{with(op(opBase), func(p *pdu) { p.verMax, p.verMin = 1, 1 })},
			status: StatusUnsupportedVersion, words: []string{"Version-min=1"}},
		{name: "version range 0 to 2 accepted", reqs: []pdu{with(op(opBase), func(p *pdu) { p.verMax, p.verMin = 2, 0 })},
			status: 0},
		{name: "InitiatorName missing", reqs: []pdu{op("TargetName=" + iqnTarget)},
			status: StatusMissingParameter, words: []string{"InitiatorName"}},
		{name: "InitiatorName missing, discovery", reqs: []pdu{op("SessionType=Discovery")},
			status: StatusMissingParameter, words: []string{"InitiatorName"}},
		{name: "TargetName missing", reqs: []pdu{op("InitiatorName=" + iqnInit + "\nRDMAExtensions=Yes")},
			status: StatusMissingParameter, words: []string{"TargetName"}},
		{name: "TargetName unknown", reqs: []pdu{op("InitiatorName=" + iqnInit + "\nTargetName=iqn.2000-01.com.example:none")},
			status: StatusNotFound, words: []string{`TargetName="iqn.2000-01.com.example:none"`}},
		{name: "no Lookup", cfg: func(c *TargetConfig) { c.Lookup = nil }, reqs: []pdu{op(opBase)},
			status: StatusNotFound},
		{name: "initiator not allowed", policy: &TargetPolicy{Initiators: []string{iqnInit2}}, reqs: []pdu{op(opBase)},
			status: StatusAuthorizationFailure, words: []string{`InitiatorName="` + iqnInit + `"`}},
		{name: "SessionType unknown", reqs: []pdu{op(opBase + "\nSessionType=Maintenance")},
			status: StatusSessionTypeNotSupported, words: []string{`SessionType="Maintenance"`}},
		{name: "SessionType reserved value", reqs: []pdu{op(opBase + "\nSessionType=Reject")},
			status: StatusSessionTypeNotSupported},
		{name: "RDMAExtensions=No", reqs: []pdu{op("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nRDMAExtensions=No")},
			status: StatusInitiatorError, words: []string{"RDMAExtensions=No", "RFC 7145"}},
		{name: "RDMAExtensions=No answering the target", reqs: []pdu{
			op("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget), op("RDMAExtensions=No")},
			status: StatusInitiatorError, words: []string{"RDMAExtensions"}},
		{name: "RDMAExtensions proposal unanswered", reqs: []pdu{
			op("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget), op("")},
			status: StatusMissingParameter, words: []string{`RDMAExtensions="Yes"`}},
		{name: "key twice in one PDU", reqs: []pdu{op(opBase + "\nMaxBurstLength=65536\nMaxBurstLength=65536")},
			status: StatusInitiatorError, words: []string{"MaxBurstLength sent twice"}},
		{name: "key twice across PDUs", reqs: []pdu{noT(op(opBase + "\nImmediateData=No")), op("ImmediateData=No")},
			status: StatusInitiatorError, words: []string{"ImmediateData sent twice"}},
		{name: "InitiatorName twice", reqs: []pdu{op(opBase + "\nInitiatorName=" + iqnInit2)},
			status: StatusInitiatorError, words: []string{"InitiatorName sent twice"}},
		{name: "InitiatorName redeclared", reqs: []pdu{noT(op(opBase)), op("InitiatorName=" + iqnInit)},
			status: StatusInitiatorError, words: []string{"InitiatorName sent twice"}},
		{name: "unknown key twice", reqs: []pdu{op(opBase + "\nX-com.example.a=1\nX-com.example.a=1")},
			status: StatusInitiatorError, words: []string{"X-com.example.a"}},
		{name: "bad InitiatorName", reqs: []pdu{op("InitiatorName=host1\nTargetName=" + iqnTarget)},
			status: StatusInitiatorError, words: []string{`InitiatorName="host1"`}},
		{name: "bad eui name", reqs: []pdu{op("InitiatorName=eui.12345\nTargetName=" + iqnTarget)},
			status: StatusInitiatorError, words: []string{"eui.12345"}},
		{name: "not a number", reqs: []pdu{op(opBase + "\nMaxBurstLength=abc")},
			status: StatusInitiatorError, words: []string{`MaxBurstLength="abc"`, "not a numerical-value"}},
		{name: "leading zero", reqs: []pdu{op(opBase + "\nMaxBurstLength=065536")},
			status: StatusInitiatorError, words: []string{`MaxBurstLength="065536"`, "leading zero"}},
		{name: "leading garbage", reqs: []pdu{op(opBase + "\nFirstBurstLength=x512")},
			status: StatusInitiatorError, words: []string{`FirstBurstLength="x512"`}},
		{name: "trailing garbage", reqs: []pdu{op(opBase + "\nFirstBurstLength=512 ")},
			status: StatusInitiatorError, words: []string{`FirstBurstLength="512 "`}},
		{name: "below range", reqs: []pdu{op(opBase + "\nMaxBurstLength=100")},
			status: StatusInitiatorError, words: []string{`MaxBurstLength="100"`, "outside 512"}},
		{name: "above range", reqs: []pdu{op(opBase + "\nDefaultTime2Wait=3601")},
			status: StatusInitiatorError, words: []string{`DefaultTime2Wait="3601"`}},
		{name: "above 2**64", reqs: []pdu{op(opBase + "\nMaxConnections=18446744073709551616")},
			status: StatusInitiatorError, words: []string{"MaxConnections", "2**64"}},
		{name: "hex above 2**64", reqs: []pdu{op(opBase + "\nMaxConnections=0x10000000000000000")},
			status: StatusInitiatorError, words: []string{"MaxConnections"}},
		{name: "MaxConnections 0", reqs: []pdu{op(opBase + "\nMaxConnections=0")},
			status: StatusInitiatorError, words: []string{`MaxConnections="0"`}},
		{name: "ErrorRecoveryLevel 3", reqs: []pdu{op(opBase + "\nErrorRecoveryLevel=3")},
			status: StatusInitiatorError, words: []string{`ErrorRecoveryLevel="3"`}},
		{name: "TargetRecvDataSegmentLength 511", reqs: []pdu{op(opBase + "\nTargetRecvDataSegmentLength=511")},
			status: StatusInitiatorError, words: []string{`TargetRecvDataSegmentLength="511"`}},
		{name: "MaxOutstandingUnexpectedPDUs 1", reqs: []pdu{op(opBase + "\nMaxOutstandingUnexpectedPDUs=1")},
			status: StatusInitiatorError, words: []string{`MaxOutstandingUnexpectedPDUs="1"`}},
		{name: "MaxRecvDataSegmentLength malformed", reqs: []pdu{op(opBase + "\nMaxRecvDataSegmentLength=8k")},
			status: StatusInitiatorError, words: []string{`MaxRecvDataSegmentLength="8k"`}},
		{name: "boolean lowercase", reqs: []pdu{op(opBase + "\nImmediateData=yes")},
			status: StatusInitiatorError, words: []string{`ImmediateData="yes"`, "boolean"}},
		{name: "value too long", reqs: []pdu{op(opBase + "\nInitiatorAlias=" + long)},
			status: StatusInitiatorError, words: []string{"InitiatorAlias", "longer than 255"}},
		{name: "empty list element", reqs: []pdu{op(opBase + "\nHeaderDigest=None,")},
			status: StatusInitiatorError, words: []string{"HeaderDigest"}},
		{name: "reserved value as proposal", reqs: []pdu{op(opBase + "\nMaxBurstLength=Reject")},
			status: StatusInitiatorError, words: []string{`MaxBurstLength="Reject"`}},
		{name: "NotUnderstood as proposal", reqs: []pdu{op(opBase + "\nX-com.example.k=NotUnderstood")},
			status: StatusInitiatorError, words: []string{"X-com.example.k"}},
		{name: "pair without =", reqs: []pdu{op(opBase + "\nMaxBurstLength")},
			status: StatusInitiatorError, words: []string{`"MaxBurstLength"`, "without '='"}},
		{name: "bad key character", reqs: []pdu{op(opBase + "\nMax Burst=1")},
			status: StatusInitiatorError, words: []string{`"Max Burst"`}},
		{name: "unterminated", reqs: []pdu{with(op(""), func(p *pdu) { p.raw = append(textBytes(opBase), "MaxBurstLength=512"...) })},
			status: StatusInitiatorError, words: []string{"MaxBurstLength", "not terminated"}},
		{name: "skip security, CHAP required", policy: &TargetPolicy{CHAP: oneWay}, reqs: []pdu{op(opBase)},
			status: StatusAuthFailure, words: []string{"skipped SecurityNegotiation"}},
		{name: "AuthMethod=None, CHAP required", policy: &TargetPolicy{CHAP: oneWay},
			reqs:   []pdu{sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nAuthMethod=None")},
			status: StatusAuthFailure, words: []string{`AuthMethod="None"`, "requires CHAP"}},
		{name: "AuthMethod=KRB5,SRP, no CHAP configured",
			reqs:   []pdu{sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nAuthMethod=KRB5,SRP")},
			status: StatusAuthFailure, words: []string{`AuthMethod="KRB5,SRP"`}},
		{name: "AuthMethod reserved", reqs: []pdu{sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nAuthMethod=None,Reject")},
			status: StatusInitiatorError, words: []string{"AuthMethod"}},
		{name: "proposed AuthMethod answered None", policy: &TargetPolicy{CHAP: oneWay}, reqs: []pdu{
			noT(sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget)), sec("AuthMethod=None")},
			status: StatusAuthFailure, words: []string{`AuthMethod="None"`}},
		{name: "proposed AuthMethod unanswered", policy: &TargetPolicy{CHAP: oneWay}, reqs: []pdu{
			noT(sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget)), sec("")},
			status: StatusMissingParameter, words: []string{"AuthMethod"}},
		{name: "CHAP_A missing", policy: &TargetPolicy{CHAP: oneWay}, reqs: []pdu{
			sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nAuthMethod=CHAP"), noT(sec(""))},
			status: StatusMissingParameter, words: []string{"CHAP_A"}},
		{name: "CHAP key without CHAP", reqs: []pdu{sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nCHAP_A=5")},
			status: StatusInitiatorError, words: []string{"CHAP_A without AuthMethod=CHAP"}},
		{name: "CSG=3 first", reqs: []pdu{with(op(opBase), func(p *pdu) { p.csg = 3 })},
			status: StatusInvalidDuringLogin, words: []string{"CSG=3"}},
		{name: "CSG=2 first", reqs: []pdu{with(op(opBase), func(p *pdu) { p.csg = 2 })},
			status: StatusInitiatorError, words: []string{"CSG=2"}},
		{name: "operational to operational", reqs: []pdu{with(op(opBase), func(p *pdu) { p.nsg = 1 })},
			status: StatusInvalidDuringLogin, words: []string{"stage 1 to stage 1"}},
		{name: "security to security", reqs: []pdu{with(sec(opBase), func(p *pdu) { p.nsg = 0 })},
			status: StatusInvalidDuringLogin, words: []string{"stage 0 to stage 0"}},
		{name: "operational to security", reqs: []pdu{with(op(opBase), func(p *pdu) { p.nsg = 0 })},
			status: StatusInvalidDuringLogin},
		{name: "NSG=2", reqs: []pdu{with(op(opBase), func(p *pdu) { p.nsg = 2 })},
			status: StatusInitiatorError, words: []string{"NSG=2"}},
		{name: "back to security", reqs: []pdu{
			sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget), sec("")},
			status: StatusInvalidDuringLogin, words: []string{"CSG=0", "stage 1"}},
		{name: "T and C", reqs: []pdu{with(op(opBase), func(p *pdu) { p.cont = true })},
			status: StatusInitiatorError, words: []string{"T and C"}},
		{name: "SCSI Command during login", reqs: []pdu{with(op(""), func(p *pdu) { p.opcode = iscsi.OpSCSICommand })},
			status: StatusInvalidDuringLogin, words: []string{"SCSI Command"}},
		{name: "Text Request after a Login Request", reqs: []pdu{noT(op(opBase)), with(op("SendTargets=All"), func(p *pdu) { p.opcode = iscsi.OpTextReq })},
			status: StatusInvalidDuringLogin, words: []string{"Text Request"}},
		{name: "TSIH of an unknown session", reqs: []pdu{with(op(opBase), func(p *pdu) { p.tsih = 5 })},
			status: StatusSessionDoesNotExist, words: []string{"TSIH=5"}},
		{name: "operational key in SecurityNegotiation", reqs: []pdu{sec(opBase)},
			status: StatusInitiatorError, words: []string{"RDMAExtensions", "SecurityNegotiation"}},
		{name: "CHAP key in LoginOperationalNegotiation", reqs: []pdu{op(opBase + "\nCHAP_A=5")},
			status: StatusInitiatorError, words: []string{"CHAP_A", "only in SecurityNegotiation"}},
		{name: "AuthMethod in LoginOperationalNegotiation", reqs: []pdu{op(opBase + "\nAuthMethod=None")},
			status: StatusInitiatorError, words: []string{"AuthMethod"}},
		{name: "SendTargets during login", reqs: []pdu{op(opBase + "\nSendTargets=All")},
			status: StatusInitiatorError, words: []string{"SendTargets", "Full Feature Phase"}},
		{name: "target key from the initiator", reqs: []pdu{op(opBase + "\nTargetAlias=me")},
			status: StatusInitiatorError, words: []string{"TargetAlias", "not sent by an initiator"}},
		{name: "AHS", reqs: []pdu{with(op(opBase), func(p *pdu) { p.ahs = 1 })},
			status: StatusInitiatorError, words: []string{"TotalAHSLength=1"}},
		{name: "data segment above 8192", reqs: []pdu{with(op(opBase+"\nX-com.example.pad="+strings.Repeat("p", 200)), func(p *pdu) { p.dslExtra = 9000 })},
			status: StatusInitiatorError, words: []string{"8192"}},
		{name: "data segment truncated", reqs: []pdu{with(op(opBase), func(p *pdu) { p.dslExtra = 16 })},
			status: StatusInitiatorError, words: []string{"only"}},
		{name: "shorter than a BHS", raw: make([]byte, 20),
			status: StatusInitiatorError, words: []string{"20 octets"}},
		{name: "ITT changes", reqs: []pdu{noT(op(opBase)), with(op(""), func(p *pdu) { p.itt = 6 })},
			status: StatusInitiatorError, words: []string{"Initiator Task Tag"}},
		{name: "CID changes", reqs: []pdu{noT(op(opBase)), with(op(""), func(p *pdu) { p.cid = 1 })},
			status: StatusInitiatorError, words: []string{"CID"}},
		{name: "CmdSN changes", reqs: []pdu{noT(op(opBase)), with(op(""), func(p *pdu) { p.cmdSN++ })},
			status: StatusInitiatorError, words: []string{"CmdSN"}},
		{name: "ISID changes", reqs: []pdu{noT(op(opBase)), with(op(""), func(p *pdu) { p.isid++ })},
			status: StatusInitiatorError, words: []string{"ISID"}},
		{name: "too many unknown keys to answer", reqs: []pdu{
			cont(op(opBase + "\n" + strings.Join(unknown[:150], "\n"))),
			op(strings.Join(unknown[150:300], "\n")),
		}, status: StatusInitiatorError, words: []string{"unknown keys"}},
		{name: "FirstBurstLength above MaxBurstLength", reqs: []pdu{noT(op(opBase + "\nFirstBurstLength=65536")), op("MaxBurstLength=4096")},
			status: StatusInitiatorError, words: []string{"FirstBurstLength=65536", "MaxBurstLength=4096"}},
		{name: "SessionType changed later", reqs: []pdu{noT(op(opBase)), op("SessionType=Discovery")},
			status: StatusInitiatorError, words: []string{`SessionType="Discovery"`}},
		{name: "InitiatorAlias later", reqs: []pdu{noT(op(opBase)), op("InitiatorAlias=later")}},
		{name: "InitiatorAlias later, not UTF-8", reqs: []pdu{noT(op(opBase)), op("InitiatorAlias=\xff")},
			status: StatusInitiatorError, words: []string{"InitiatorAlias"}},
		{name: "SessionType=Normal later", reqs: []pdu{noT(op(opBase)), op("SessionType=Normal")}},
		{name: "TargetName later, Discovery", reqs: []pdu{noT(op("InitiatorName=" + iqnInit + "\nSessionType=Discovery")), op("TargetName=" + iqnOther)}},
		{name: "TargetName later, Discovery, malformed", reqs: []pdu{noT(op("InitiatorName=" + iqnInit + "\nSessionType=Discovery")), op("TargetName=disk")},
			status: StatusInitiatorError, words: []string{`TargetName="disk"`}},
		{name: "too many exchanges", reqs: func() []pdu {
			r := []pdu{noT(op(opBase))}
			for range maxExchanges {
				r = append(r, noT(op("")))
			}
			return r
		}(), status: StatusInitiatorError, words: []string{"more than 64"}},
		{name: "text too long", reqs: func() []pdu {
			var r []pdu
			for range 9 {
				r = append(r, cont(op("X-com.example.k="+strings.Repeat("v", 250)+"\n"+strings.Repeat("Y=1\n", 1900)+"Z=2")))
			}
			return r
		}(), status: StatusInitiatorError, words: []string{"longer than"}},
		{name: "misconfigured target", cfg: func(c *TargetConfig) { c.Offer.ErrorRecoveryLevel = 1 }, reqs: []pdu{op(opBase)},
			status: StatusTargetError, words: []string{"ErrorRecoveryLevel"}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			cfg := targetCfg(c.policy)
			if c.cfg != nil {
				c.cfg(cfg)
			}
			tg := NewTarget(cfg)
			reqs := make([][]byte, 0, len(c.reqs))
			for _, p := range c.reqs {
				reqs = append(reqs, p.bytes())
			}
			if c.raw != nil {
				reqs = [][]byte{c.raw}
			}
			var err error
			var done bool
			var resp []byte
			for k, r := range reqs {
				resp, done, err = tg.Step(nil, r)
				checkResponse(t, resp)
				if k < len(reqs)-1 && (done || err != nil) {
					t.Fatalf("request %d: done=%v err=%v", k, done, err)
				}
			}
			if c.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !done {
				t.Fatal("not done after a failure")
			}
			wantStatus(t, err, c.status, c.words...)
			ri := decodeResp(t, resp)
			if got := Status(uint16(ri.StatusClass())<<8 | uint16(ri.StatusDetail())); got != c.status {
				t.Errorf("response status 0x%04x", uint16(got))
			}
			if ri.Transit() || ri.DataSegmentLength() != 0 || (len(c.reqs) > 0 && ri.TSIH() != c.reqs[0].tsih) {
				t.Errorf("reject with T=%v, %d octets of text, TSIH %d", ri.Transit(), ri.DataSegmentLength(), ri.TSIH())
			}
			if len(reqs[0]) >= iscsi.BHSLen && ri.ITT() != iscsi.BHS(reqs[0][:48]).ITT() {
				t.Errorf("ITT %d not echoed", ri.ITT())
			}
			// Nothing more after a failure.
			if out, done, err := tg.Step(nil, op("").bytes()); len(out) != 0 || !done || !errors.Is(err, ErrFinished) {
				t.Errorf("Step after failure: %d octets, %v, %v", len(out), done, err)
			}
		})
	}
}

// TestTargetAnswers checks the answers of a Target to single keys (section
// 6.2 and 13; RFC 7145 section 6), in a Normal or a Discovery session.
func TestTargetAnswers(t *testing.T) {
	disc := "InitiatorName=" + iqnInit + "\nSessionType=Discovery"
	tests := []struct {
		name  string
		first string // the session keys
		offer func(*Params)
		key   string // key=value sent
		want  string // the answer; "" = no answer expected
	}{
		{"InitialR2T OR, ours Yes", opBase, nil, "InitialR2T=No", "Yes"},
		{"InitialR2T OR, ours No", opBase, func(p *Params) { p.InitialR2T = false }, "InitialR2T=No", "No"},
		{"InitialR2T OR, Yes", opBase, func(p *Params) { p.InitialR2T = false }, "InitialR2T=Yes", "Yes"},
		{"ImmediateData AND", opBase, func(p *Params) { p.ImmediateData = false }, "ImmediateData=Yes", "No"},
		{"ImmediateData AND, both Yes", opBase, nil, "ImmediateData=Yes", "Yes"},
		{"DataPDUInOrder OR", opBase, nil, "DataPDUInOrder=No", "Yes"},
		{"DataSequenceInOrder OR", opBase, func(p *Params) { p.DataSequenceInOrder = false }, "DataSequenceInOrder=No", "No"},
		{"MaxBurstLength min", opBase, nil, "MaxBurstLength=1048576", "262144"},
		{"MaxBurstLength min, lower", opBase, nil, "MaxBurstLength=0x10000", "65536"},
		{"FirstBurstLength min", opBase, nil, "FirstBurstLength=16777215", "65536"},
		{"FirstBurstLength capped by MaxBurstLength", opBase, nil, "MaxBurstLength=8192\nFirstBurstLength=65536", "8192"},
		{"DefaultTime2Wait max", opBase, nil, "DefaultTime2Wait=0", "2"},
		{"DefaultTime2Wait max, higher", opBase, nil, "DefaultTime2Wait=60", "60"},
		{"DefaultTime2Retain min", opBase, nil, "DefaultTime2Retain=3600", "20"},
		{"MaxOutstandingR2T min", opBase, func(p *Params) { p.MaxOutstandingR2T = 4 }, "MaxOutstandingR2T=16", "4"},
		{"MaxConnections min", opBase, nil, "MaxConnections=8", "1"},
		{"ErrorRecoveryLevel min", opBase, nil, "ErrorRecoveryLevel=2", "0"},
		{"TargetRecvDataSegmentLength min", opBase, nil, "TargetRecvDataSegmentLength=262144", "8192"},
		{"InitiatorRecvDataSegmentLength min", opBase, func(p *Params) { p.InitiatorRecvDataSegmentLength = 65536 }, "InitiatorRecvDataSegmentLength=16384", "16384"},
		{"HeaderDigest None", opBase, nil, "HeaderDigest=CRC32C,None", "None"},
		{"HeaderDigest CRC32C only, iSER", opBase, nil, "HeaderDigest=CRC32C", "Irrelevant"},
		{"DataDigest unknown digest ignored", opBase, nil, "DataDigest=Y-com.example.d,None", "None"},
		{"DataDigest CRC32C only, Discovery", disc, nil, "DataDigest=CRC32C", "Reject"},
		{"IFMarker, iSER", opBase, nil, "IFMarker=No", "Irrelevant"},
		{"OFMarker, Discovery", disc, nil, "OFMarker=No", "Reject"},
		{"OFMarkInt", opBase, nil, "OFMarkInt=1~65535", "Reject"},
		{"TaskReporting", opBase, nil, "TaskReporting=ResponseFence,RFC3720", "RFC3720"},
		{"TaskReporting unsupported", opBase, nil, "TaskReporting=FastAbort", "Reject"},
		{"iSCSIProtocolLevel", opBase, nil, "iSCSIProtocolLevel=2", "1"},
		{"unknown key", opBase, nil, "X-com.example.feature=on", "NotUnderstood"},
		{"unknown public key", opBase, nil, "FutureKey=1", "NotUnderstood"},
		{"X#NodeArchitecture", opBase, nil, "X#NodeArchitecture=Linux/6.1", ""},
		{"MaxRecvDataSegmentLength ignored with iSER", opBase, nil, "MaxRecvDataSegmentLength=262144", ""},
		{"MaxOutstandingUnexpectedPDUs declared back", opBase, func(p *Params) { p.MaxOutstandingUnexpectedPDUs = 16 }, "MaxOutstandingUnexpectedPDUs=0", "16"},
		{"iSERHelloRequired declared", opBase, nil, "iSERHelloRequired=Yes", ""},
		{"InitialR2T in Discovery", disc, nil, "InitialR2T=No", "Irrelevant"},
		{"MaxBurstLength in Discovery", disc, nil, "MaxBurstLength=512", "Irrelevant"},
		{"RDMAExtensions in Discovery", disc, nil, "RDMAExtensions=Yes", "Irrelevant"},
		{"TargetRecvDataSegmentLength in Discovery", disc, nil, "TargetRecvDataSegmentLength=4096", "Irrelevant"},
		{"MaxRecvDataSegmentLength in Discovery", disc, nil, "MaxRecvDataSegmentLength=4096", "8192"},
		{"DefaultTime2Wait in Discovery", disc, nil, "DefaultTime2Wait=1", "2"},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			cfg := targetCfg(nil)
			if c.offer != nil {
				c.offer(&cfg.Offer)
			}
			tg := NewTarget(cfg)
			resp, done, err := tg.Step(nil, op(c.first+"\n"+c.key).bytes())
			if err != nil || !done {
				t.Fatalf("done=%v err=%v", done, err)
			}
			r := decodeResp(t, resp)
			key := c.key[strings.LastIndexByte("\n"+c.key, '\n'):]
			key = key[:strings.IndexByte(key, '=')]
			got, ok := r.get(key)
			if c.want == "" {
				if ok {
					t.Fatalf("unexpected answer %s=%s", key, got)
				}
				return
			}
			if got != c.want {
				t.Fatalf("answer %s=%q, want %q\n%s", key, got, c.want, r.text())
			}
		})
	}
}

// TestTargetFlow checks the stage transitions, the C bit and the fields of
// every response over multi-PDU logins.
func TestTargetFlow(t *testing.T) {
	type want struct {
		transit  bool
		csg, nsg uint8
		keys     []string // keys that must be in the response
		final    bool
	}
	tests := []struct {
		name   string
		policy *TargetPolicy
		disc   bool
		reqs   []pdu
		want   []want
	}{
		{name: "one PDU", reqs: []pdu{op(opBase)},
			want: []want{{transit: true, csg: 1, nsg: 3, keys: []string{"TargetPortalGroupTag", "RDMAExtensions"}, final: true}}},
		{name: "alias", policy: &TargetPolicy{Alias: "Bob-s Disk"}, reqs: []pdu{op(opBase)},
			want: []want{{transit: true, csg: 1, nsg: 3, keys: []string{"TargetAlias"}, final: true}}},
		{name: "C bit", reqs: []pdu{
			with(cont(op("")), func(p *pdu) { p.raw = []byte("InitiatorName=" + iqnInit + "\x00TargetNa") }),
			with(cont(op("")), func(p *pdu) { p.raw = []byte("me=" + iqnTarget + "\x00RDMAExt") }),
			op("ensions=Yes"),
		}, want: []want{{csg: 1}, {csg: 1}, {transit: true, csg: 1, nsg: 3, keys: []string{"RDMAExtensions", "TargetPortalGroupTag"}, final: true}}},
		{name: "T=0 then T=1", reqs: []pdu{noT(op(opBase)), op("")},
			want: []want{{csg: 1, keys: []string{"TargetPortalGroupTag"}}, {transit: true, csg: 1, nsg: 3, final: true}}},
		{name: "target offers RDMAExtensions", reqs: []pdu{op("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget), op("RDMAExtensions=Yes")},
			want: []want{{csg: 1, keys: []string{"RDMAExtensions"}}, {transit: true, csg: 1, nsg: 3, final: true}}},
		{name: "security None then operational", reqs: []pdu{
			sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nAuthMethod=CHAP,None"), op("RDMAExtensions=Yes")},
			want: []want{{transit: true, csg: 0, nsg: 1, keys: []string{"AuthMethod", "TargetPortalGroupTag"}}, {transit: true, csg: 1, nsg: 3, final: true}}},
		{name: "security without AuthMethod", reqs: []pdu{
			sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget), op("RDMAExtensions=Yes")},
			want: []want{{transit: true, csg: 0, nsg: 1}, {transit: true, csg: 1, nsg: 3, final: true}}},
		{name: "security to full feature selects operational", reqs: []pdu{
			with(sec("InitiatorName="+iqnInit+"\nTargetName="+iqnTarget+"\nAuthMethod=None"), func(p *pdu) { p.nsg = 3 }), op("RDMAExtensions=Yes")},
			want: []want{{transit: true, csg: 0, nsg: 1}, {transit: true, csg: 1, nsg: 3, final: true}}},
		{name: "discovery security to full feature", disc: true, reqs: []pdu{
			with(sec("InitiatorName="+iqnInit+"\nSessionType=Discovery\nAuthMethod=None"), func(p *pdu) { p.nsg = 3 })},
			want: []want{{transit: true, csg: 0, nsg: 3, keys: []string{"AuthMethod", "TargetPortalGroupTag"}, final: true}}},
		{name: "target-directed AuthMethod", policy: &TargetPolicy{CHAP: oneWay}, reqs: []pdu{
			noT(sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget)),
			noT(sec("AuthMethod=CHAP\nCHAP_A=5")),
		}, want: []want{{csg: 0, keys: []string{"AuthMethod"}}, {csg: 0, keys: []string{"CHAP_A", "CHAP_I", "CHAP_C"}}}},
		{name: "target proposes FirstBurstLength", reqs: []pdu{op(opBase + "\nMaxBurstLength=4096"), op("FirstBurstLength=4096")},
			want: []want{{csg: 1, keys: []string{"MaxBurstLength", "FirstBurstLength"}}, {transit: true, csg: 1, nsg: 3, final: true}}},
		{name: "CHAP holds the transition", policy: &TargetPolicy{CHAP: oneWay}, reqs: []pdu{
			sec("InitiatorName=" + iqnInit + "\nTargetName=" + iqnTarget + "\nAuthMethod=CHAP"),
			sec("CHAP_A=7,5"),
		}, want: []want{{csg: 0, keys: []string{"AuthMethod"}}, {csg: 0, keys: []string{"CHAP_A", "CHAP_C"}}}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			tg := NewTarget(targetCfg(c.policy))
			statSN := uint32(100)
			for k, p := range c.reqs {
				resp, done, err := tg.Step(nil, p.bytes())
				if err != nil {
					t.Fatalf("request %d: %v", k, err)
				}
				w := c.want[k]
				r := decodeResp(t, resp)
				if done != w.final || r.Transit() != w.transit || r.CSG() != w.csg || (w.transit && r.NSG() != w.nsg) {
					t.Fatalf("response %d: done=%v T=%v CSG=%d NSG=%d, want %+v", k, done, r.Transit(), r.CSG(), r.NSG(), w)
				}
				if r.Continue() {
					t.Errorf("response %d: C set", k)
				}
				if p.cont && r.DataSegmentLength() != 0 {
					t.Errorf("response %d to C=1: %d octets of text", k, r.DataSegmentLength())
				}
				for _, key := range w.keys {
					if _, ok := r.get(key); !ok {
						t.Errorf("response %d lacks %s:\n%s", k, key, r.text())
					}
				}
				if r.StatSN() != statSN || r.ExpCmdSN() != tCmdSN || r.MaxCmdSN() != tCmdSN+31 || r.ISID() != tISID || r.ITT() != tITT {
					t.Errorf("response %d: StatSN %d ExpCmdSN %d MaxCmdSN %d ISID %x ITT %d", k, r.StatSN(), r.ExpCmdSN(), r.MaxCmdSN(), r.ISID(), r.ITT())
				}
				statSN++
				if (r.TSIH() != 0) != w.final {
					t.Errorf("response %d: TSIH %d", k, r.TSIH())
				}
			}
			if last := c.want[len(c.want)-1]; last.final {
				res := tg.Result()
				if res.TSIH == 0 || res.StatSN != statSN || res.CmdSN != tCmdSN || res.ISID != tISID || res.CID != tCID || res.InitiatorName != iqnInit {
					t.Errorf("result %+v", res)
				}
				if c.disc != (res.SessionType == SessionDiscovery) {
					t.Errorf("session type %q", res.SessionType)
				}
				if out, done, err := tg.Step([]byte{1}, op("").bytes()); len(out) != 1 || !done || !errors.Is(err, ErrFinished) {
					t.Errorf("Step after done: %d octets, %v, %v", len(out), done, err)
				}
			}
		})
	}
}

// TestTargetQueueDepth checks MaxCmdSN = ExpCmdSN + QueueDepth - 1, with
// the default for 0, across the CmdSN wrap.
func TestTargetQueueDepth(t *testing.T) {
	for _, c := range []struct {
		qd, cmdSN, want uint32
	}{
		{1, 10, 10}, {32, 10, 41}, {0, 10, 10 + DefaultQueueDepth - 1}, {16, 0xfffffff8, 7},
	} {
		cfg := targetCfg(nil)
		cfg.QueueDepth = c.qd
		resp, _, err := NewTarget(cfg).Step(nil, with(op(opBase), func(p *pdu) { p.cmdSN = c.cmdSN }).bytes())
		if err != nil {
			t.Fatal(err)
		}
		if r := decodeResp(t, resp); r.MaxCmdSN() != c.want || r.ExpCmdSN() != c.cmdSN {
			t.Errorf("QueueDepth %d CmdSN %d: ExpCmdSN %d MaxCmdSN %d, want %d", c.qd, c.cmdSN, r.ExpCmdSN(), r.MaxCmdSN(), c.want)
		}
	}
}

// TestTargetTSIH checks that the target assigns non-zero handles, from
// NewTSIH or from its own counter.
func TestTargetTSIH(t *testing.T) {
	cfg := targetCfg(nil)
	cfg.NewTSIH = nil
	seen := map[uint16]bool{}
	for range 3 {
		tg := NewTarget(cfg)
		if _, _, err := tg.Step(nil, op(opBase).bytes()); err != nil {
			t.Fatal(err)
		}
		tsih := tg.Result().TSIH
		if tsih == 0 || seen[tsih] {
			t.Fatalf("TSIH %d (seen %v)", tsih, seen)
		}
		seen[tsih] = true
	}
}

// TestTargetNilConfig checks that a nil configuration fails the login with
// Target error instead of panicking.
func TestTargetNilConfig(t *testing.T) {
	resp, done, err := NewTarget(nil).Step(nil, op(opBase).bytes())
	checkResponse(t, resp)
	if !done {
		t.Fatal("not done")
	}
	wantStatus(t, err, StatusTargetError, "nil TargetConfig")
}
