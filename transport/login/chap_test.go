package login

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestCHAPResponse checks the CHAP Response Value of RFC 1994 section 4.1,
// MD5(Identifier || secret || Challenge), against vectors computed
// independently (Python hashlib).
func TestCHAPResponse(t *testing.T) {
	for _, c := range []struct {
		id        byte
		secret    string
		challenge string
		want      string
	}{
		{1, "secret", "000102030405060708090a0b0c0d0e0f", "740e86463bda3a4d7017d6e0fba0699d"},
		{0xff, "initiator-secret-123", "00112233445566778899aabbccddeeff", "2126d8ce260df2323d2fca47a5ae6f13"},
	} {
		ch, _ := hex.DecodeString(c.challenge)
		if got := hex.EncodeToString(chapResponse(c.id, c.secret, ch)); got != c.want {
			t.Errorf("chapResponse(%d, %q, %s) = %s, want %s", c.id, c.secret, c.challenge, got, c.want)
		}
	}
}

// TestCHAPValidate checks the credential rules.
func TestCHAPValidate(t *testing.T) {
	for _, c := range []struct {
		chap CHAP
		ok   bool
	}{
		{CHAP{User: "u", Secret: "short"}, true}, // short secrets are accepted
		{CHAP{User: "u", Secret: "s", MutualUser: "t", MutualSecret: "m"}, true},
		{CHAP{Secret: "s"}, false},
		{CHAP{User: "u"}, false},
		{CHAP{User: "u", Secret: "s", MutualUser: "t"}, false},
		{CHAP{User: "u", Secret: "s", MutualSecret: "m"}, false},
		{CHAP{User: "u", Secret: "same", MutualUser: "t", MutualSecret: "same"}, false},
		{CHAP{User: strings.Repeat("u", 256), Secret: "s"}, false},
	} {
		err := c.chap.validate("test")
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", c.chap, err)
		}
	}
}

// chapLogin drives a Target through SecurityNegotiation with CHAP up to
// the challenge and returns the target, its CHAP_I and CHAP_C.
func chapLogin(t *testing.T, cred *CHAP) (*Target, byte, []byte) {
	t.Helper()
	tg := NewTarget(targetCfg(&TargetPolicy{CHAP: cred}))
	resp, _, err := tg.Step(nil, sec("InitiatorName="+iqnInit+"\nTargetName="+iqnTarget+"\nAuthMethod=CHAP,None").bytes())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := decodeResp(t, resp).get("AuthMethod"); v != "CHAP" {
		t.Fatalf("AuthMethod=%q", v)
	}
	resp, _, err = tg.Step(nil, noT(sec("CHAP_A=5")).bytes())
	if err != nil {
		t.Fatal(err)
	}
	r := decodeResp(t, resp)
	a, _ := r.get("CHAP_A")
	i, _ := r.get("CHAP_I")
	c, _ := r.get("CHAP_C")
	id, err := strconv.Atoi(i)
	if a != "5" || err != nil || !strings.HasPrefix(c, "0x") || len(c) != 2+2*ChallengeLen {
		t.Fatalf("challenge CHAP_A=%q CHAP_I=%q CHAP_C=%q", a, i, c)
	}
	ch, _ := hex.DecodeString(c[2:])
	return tg, byte(id), ch
}

// TestTargetCHAP checks the target's side of CHAP (section 12.1.3), one-way
// and mutual, with right and wrong secrets and every malformed step.
func TestTargetCHAP(t *testing.T) {
	hexR := func(id byte, secret string, ch []byte) string { return encodeHex(chapResponse(id, secret, ch)) }
	myC := "0x" + strings.Repeat("5a", 16)
	myCb, _ := hex.DecodeString(myC[2:])
	tests := []struct {
		name   string
		cred   *CHAP
		answer func(id byte, ch []byte) string // the initiator's keys after the challenge
		status Status
		words  []string
		check  func(t *testing.T, r respInfo)
	}{
		{name: "one-way", cred: oneWay,
			answer: func(id byte, ch []byte) string { return "CHAP_N=host1\nCHAP_R=" + hexR(id, oneWay.Secret, ch) },
			check: func(t *testing.T, r respInfo) {
				if !r.Transit() || r.NSG() != 1 {
					t.Error("no transition")
				}
				if _, ok := r.get("CHAP_N"); ok {
					t.Error("CHAP_N in one-way CHAP")
				}
			}},
		{name: "one-way, base64 response", cred: oneWay,
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=0b" + base64.StdEncoding.EncodeToString(chapResponse(id, oneWay.Secret, ch))
			}},
		{name: "wrong secret", cred: oneWay, status: StatusAuthFailure, words: []string{"wrong CHAP_R", `CHAP_N="host1"`},
			answer: func(id byte, ch []byte) string { return "CHAP_N=host1\nCHAP_R=" + hexR(id, "another-secret-00", ch) }},
		{name: "wrong identifier", cred: oneWay, status: StatusAuthFailure,
			answer: func(id byte, ch []byte) string { return "CHAP_N=host1\nCHAP_R=" + hexR(id+1, oneWay.Secret, ch) }},
		{name: "wrong user", cred: oneWay, status: StatusAuthFailure, words: []string{`CHAP_N="eve"`},
			answer: func(id byte, ch []byte) string { return "CHAP_N=eve\nCHAP_R=" + hexR(id, oneWay.Secret, ch) }},
		{name: "CHAP_R missing", cred: oneWay, status: StatusMissingParameter, words: []string{"CHAP_R"},
			answer: func(id byte, ch []byte) string { return "CHAP_N=host1" }},
		{name: "CHAP_N missing", cred: oneWay, status: StatusMissingParameter, words: []string{"CHAP_N"},
			answer: func(id byte, ch []byte) string { return "CHAP_R=" + hexR(id, oneWay.Secret, ch) }},
		{name: "CHAP_R malformed", cred: oneWay, status: StatusInitiatorError, words: []string{`CHAP_R="0xzz"`},
			answer: func(id byte, ch []byte) string { return "CHAP_N=host1\nCHAP_R=0xzz" }},
		{name: "CHAP_R decimal", cred: oneWay, status: StatusInitiatorError, words: []string{"CHAP_R"},
			answer: func(id byte, ch []byte) string { return "CHAP_N=host1\nCHAP_R=12345" }},
		{name: "CHAP_A again", cred: oneWay, status: StatusInitiatorError, words: []string{"CHAP_A"},
			answer: func(id byte, ch []byte) string {
				return "CHAP_A=5\nCHAP_N=host1\nCHAP_R=" + hexR(id, oneWay.Secret, ch)
			}},
		{name: "mutual", cred: mutual,
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=200\nCHAP_C=" + myC
			},
			check: func(t *testing.T, r respInfo) {
				n, _ := r.get("CHAP_N")
				got, _ := r.get("CHAP_R")
				if n != "disk1" || got != hexR(200, mutual.MutualSecret, myCb) || !r.Transit() {
					t.Errorf("target answered CHAP_N=%q CHAP_R=%q T=%v", n, got, r.Transit())
				}
			}},
		{name: "mutual, base64 challenge", cred: mutual,
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=0x10\nCHAP_C=0b" + base64.StdEncoding.EncodeToString(myCb)
			},
			check: func(t *testing.T, r respInfo) {
				if got, _ := r.get("CHAP_R"); got != hexR(16, mutual.MutualSecret, myCb) {
					t.Errorf("CHAP_R=%q", got)
				}
			}},
		{name: "mutual, wrong initiator secret", cred: mutual, status: StatusAuthFailure,
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, "nope-nope-nope", ch) + "\nCHAP_I=200\nCHAP_C=" + myC
			}},
		{name: "mutual, response with the target's secret", cred: mutual, status: StatusAuthFailure,
			words: []string{"target's own secret"},
			answer: func(id byte, ch []byte) string {
				bad := &CHAP{User: "host1", Secret: mutual.MutualSecret}
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, bad.Secret, ch) + "\nCHAP_I=200\nCHAP_C=" + myC
			}},
		{name: "mutual, CHAP_I only", cred: mutual, status: StatusMissingParameter, words: []string{"CHAP_I and CHAP_C"},
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=200"
			}},
		{name: "mutual, CHAP_I 256", cred: mutual, status: StatusInitiatorError, words: []string{`CHAP_I="256"`},
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=256\nCHAP_C=" + myC
			}},
		{name: "mutual, short challenge", cred: mutual, status: StatusAuthFailure, words: []string{"8 octets"},
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=1\nCHAP_C=0x0102030405060708"
			}},
		{name: "mutual, challenge above 1024 octets", cred: mutual, status: StatusInitiatorError, words: []string{"1024"},
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=1\nCHAP_C=0x" + strings.Repeat("ab", 1025)
			}},
		{name: "mutual, reflected challenge", cred: mutual, status: StatusAuthFailure, words: []string{"reflected"},
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, mutual.Secret, ch) + "\nCHAP_I=" + strconv.Itoa(int(id)) + "\nCHAP_C=" + encodeHex(ch)
			}},
		{name: "mutual asked, target one-way only", cred: oneWay, status: StatusAuthFailure, words: []string{"mutual"},
			answer: func(id byte, ch []byte) string {
				return "CHAP_N=host1\nCHAP_R=" + hexR(id, oneWay.Secret, ch) + "\nCHAP_I=200\nCHAP_C=" + myC
			}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			tg, id, ch := chapLogin(t, c.cred)
			resp, done, err := tg.Step(nil, sec(c.answer(id, ch)).bytes())
			if c.status != 0 {
				if !done {
					t.Fatal("not done")
				}
				wantStatus(t, err, c.status, c.words...)
				return
			}
			if err != nil || done {
				t.Fatalf("done=%v err=%v", done, err)
			}
			r := decodeResp(t, resp)
			if c.check != nil {
				c.check(t, r)
			}
			// Then the operational stage finishes the login; CHAP keys
			// are no longer allowed.
			if _, _, err := tg.Step(nil, op("RDMAExtensions=Yes").bytes()); err != nil {
				t.Fatal(err)
			}
			if tg.Result().TSIH == 0 {
				t.Error("no TSIH")
			}
		})
	}
	t.Run("CHAP_A without MD5", func(t *testing.T) {
		tg := NewTarget(targetCfg(&TargetPolicy{CHAP: oneWay}))
		tg.Step(nil, sec("InitiatorName="+iqnInit+"\nTargetName="+iqnTarget+"\nAuthMethod=CHAP").bytes())
		_, _, err := tg.Step(nil, noT(sec("CHAP_A=6,7")).bytes())
		wantStatus(t, err, StatusAuthFailure, `CHAP_A="6,7"`)
	})
	t.Run("CHAP_A malformed", func(t *testing.T) {
		tg := NewTarget(targetCfg(&TargetPolicy{CHAP: oneWay}))
		tg.Step(nil, sec("InitiatorName="+iqnInit+"\nTargetName="+iqnTarget+"\nAuthMethod=CHAP").bytes())
		_, _, err := tg.Step(nil, noT(sec("CHAP_A=5x")).bytes())
		wantStatus(t, err, StatusInitiatorError, `CHAP_A="5x"`)
	})
	t.Run("CHAP_N before the challenge", func(t *testing.T) {
		tg := NewTarget(targetCfg(&TargetPolicy{CHAP: oneWay}))
		tg.Step(nil, sec("InitiatorName="+iqnInit+"\nTargetName="+iqnTarget+"\nAuthMethod=CHAP").bytes())
		_, _, err := tg.Step(nil, noT(sec("CHAP_N=host1\nCHAP_A=5")).bytes())
		wantStatus(t, err, StatusInitiatorError, "CHAP_N")
	})
	t.Run("CHAP after completion", func(t *testing.T) {
		tg, id, ch := chapLogin(t, oneWay)
		if _, _, err := tg.Step(nil, noT(sec("CHAP_N=host1\nCHAP_R="+hexR(id, oneWay.Secret, ch))).bytes()); err != nil {
			t.Fatal(err)
		}
		_, _, err := tg.Step(nil, sec("CHAP_I=1").bytes())
		wantStatus(t, err, StatusInitiatorError, "CHAP_I")
	})
	t.Run("random source fails", func(t *testing.T) {
		cfg := targetCfg(&TargetPolicy{CHAP: oneWay})
		cfg.Rand = strings.NewReader("short")
		tg := NewTarget(cfg)
		tg.Step(nil, sec("InitiatorName="+iqnInit+"\nTargetName="+iqnTarget+"\nAuthMethod=CHAP").bytes())
		_, _, err := tg.Step(nil, noT(sec("CHAP_A=5")).bytes())
		wantStatus(t, err, StatusTargetError, "challenge")
	})
}

// TestInitiatorCHAP checks the initiator's side of CHAP against
// handcrafted target responses.
func TestInitiatorCHAP(t *testing.T) {
	targetC := strings.Repeat("c3", 16)
	tc, _ := hex.DecodeString(targetC)
	// challenge answers the initiator's CHAP_A.
	challenge := "CHAP_A=5\nCHAP_I=9\nCHAP_C=0x" + targetC
	type step struct {
		transit bool
		nsg     uint8
		text    func(i *Initiator) string
	}
	txt := func(s string) func(*Initiator) string { return func(*Initiator) string { return s } }
	targetR := func(secret string) func(i *Initiator) string {
		return func(i *Initiator) string {
			return "CHAP_N=disk1\nCHAP_R=" + encodeHex(chapResponse(i.chap.id, secret, i.chap.challenge))
		}
	}
	tests := []struct {
		name  string
		cred  *CHAP
		steps []step
		err   error // nil: success up to LoginOperationalNegotiation
		words []string
	}{
		{name: "one-way", cred: oneWay, steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, txt("")}}},
		{name: "one-way, target picks None", cred: oneWay, steps: []step{{true, 1, txt("AuthMethod=None")}}},
		{name: "base64 challenge", cred: oneWay, steps: []step{{false, 0, txt("AuthMethod=CHAP")},
			{false, 0, txt("CHAP_A=5\nCHAP_I=9\nCHAP_C=0b" + base64.StdEncoding.EncodeToString(tc))}, {true, 1, txt("")}}},
		{name: "odd hex challenge", cred: oneWay, steps: []step{{false, 0, txt("AuthMethod=CHAP")},
			{false, 0, txt("CHAP_A=5\nCHAP_I=9\nCHAP_C=0x" + targetC[1:] + "0")}, {true, 1, txt("")}}},
		{name: "mutual", cred: mutual, steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, targetR(mutual.MutualSecret)}}},
		{name: "mutual, target answers later", cred: mutual, steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)},
			{false, 0, targetR(mutual.MutualSecret)}, {true, 1, txt("")}}},
		{name: "mutual, wrong target secret", cred: mutual, err: ErrTargetAuthentication, words: []string{"wrong CHAP_R"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, targetR("guessed-secret-1")}}},
		{name: "mutual, target used the initiator's secret", cred: &CHAP{User: "host1", Secret: "s1-secret-abcd", MutualUser: "disk1", MutualSecret: "s2-secret-abcd"},
			err: ErrTargetAuthentication, words: []string{"initiator's secret"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, targetR("s1-secret-abcd")}}},
		{name: "mutual, wrong target name", cred: mutual, err: ErrTargetAuthentication, words: []string{`CHAP_N="disk2"`},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, func(i *Initiator) string {
				return "CHAP_N=disk2\nCHAP_R=" + encodeHex(chapResponse(i.chap.id, mutual.MutualSecret, i.chap.challenge))
			}}}},
		{name: "mutual, target skips its response", cred: mutual, err: ErrTargetAuthentication, words: []string{"without answering"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, txt("")}}},
		{name: "mutual, CHAP_R alone", cred: mutual, err: ErrTargetAuthentication, words: []string{"together"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt(challenge)}, {true, 1, txt("CHAP_R=0x00")}}},
		{name: "mutual, target picks None", cred: mutual, err: ErrTargetAuthentication, words: []string{"None"},
			steps: []step{{true, 1, txt("AuthMethod=None")}}},
		{name: "AuthMethod not offered", cred: oneWay, err: ErrProtocol, words: []string{`AuthMethod="SRP"`},
			steps: []step{{false, 0, txt("AuthMethod=SRP")}}},
		{name: "AuthMethod rejected", cred: oneWay, err: ErrProtocol, words: []string{"rejected"},
			steps: []step{{false, 0, txt("AuthMethod=Reject")}}},
		{name: "AuthMethod unanswered", cred: oneWay, err: ErrProtocol, words: []string{"without answering"},
			steps: []step{{true, 1, txt("")}}},
		{name: "AuthMethod twice", cred: oneWay, err: ErrProtocol, words: []string{"AuthMethod sent twice"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt("AuthMethod=CHAP")}}},
		{name: "challenge before CHAP_A", cred: oneWay, err: ErrProtocol, words: []string{"CHAP_I"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP\nCHAP_I=1")}}},
		{name: "CHAP_A 7", cred: oneWay, err: ErrProtocol, words: []string{`CHAP_A="7"`},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt("CHAP_A=7\nCHAP_I=9\nCHAP_C=0x" + targetC)}}},
		{name: "CHAP_I 300", cred: oneWay, err: ErrProtocol, words: []string{`CHAP_I="300"`},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt("CHAP_A=5\nCHAP_I=300\nCHAP_C=0x" + targetC)}}},
		{name: "CHAP_C missing", cred: oneWay, err: ErrProtocol, words: []string{"together"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt("CHAP_A=5\nCHAP_I=9")}}},
		{name: "CHAP_C short", cred: oneWay, err: ErrProtocol, words: []string{"too weak"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt("CHAP_A=5\nCHAP_I=9\nCHAP_C=0x0102")}}},
		{name: "CHAP_C garbage", cred: oneWay, err: ErrProtocol, words: []string{"CHAP_C"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP")}, {false, 0, txt("CHAP_A=5\nCHAP_I=9\nCHAP_C=0xgg")}}},
		{name: "target ends CHAP early", cred: oneWay, err: ErrProtocol, words: []string{"before CHAP completed"},
			steps: []step{{true, 1, txt("AuthMethod=CHAP")}}},
		{name: "operational key in security", cred: oneWay, err: ErrProtocol, words: []string{"MaxBurstLength"},
			steps: []step{{false, 0, txt("AuthMethod=CHAP\nMaxBurstLength=512")}}},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			ic := initiatorCfg()
			ic.CHAP = c.cred
			in := NewInitiator(ic)
			req := in.Start(nil)
			q, ps := decodeReq(t, req)
			am, _ := pairValue(ps, "AuthMethod")
			if q.CSG() != 0 || q.NSG() != 1 || !q.Transit() || am != map[bool]string{false: "CHAP,None", true: "CHAP"}[c.cred.mutual()] {
				t.Fatalf("first request CSG=%d NSG=%d T=%v AuthMethod=%q", q.CSG(), q.NSG(), q.Transit(), am)
			}
			var err error
			var done bool
			for k, s := range c.steps {
				r := pdu{resp: true, csg: 0, nsg: s.nsg, transit: s.transit, isid: ic.ISID, itt: ic.ITT, statSN: uint32(k), text: s.text(in)}
				req, done, err = in.Step(nil, r.bytes())
				if err != nil || done {
					break
				}
				q, ps := decodeReq(t, req)
				switch {
				case k == len(c.steps)-1:
				case strings.HasPrefix(c.steps[k].text(in), "AuthMethod=CHAP"):
					if v, _ := pairValue(ps, "CHAP_A"); v != "5" || q.Transit() {
						t.Fatalf("after AuthMethod=CHAP: %v T=%v", ps, q.Transit())
					}
				case strings.HasPrefix(c.steps[k].text(in), "CHAP_A=5"):
					id, _ := strconv.Atoi(strings.Split(strings.Split(c.steps[k].text(in), "CHAP_I=")[1], "\n")[0])
					r, _ := pairValue(ps, "CHAP_R")
					ch, _ := decodeBinary(strings.Split(c.steps[k].text(in), "CHAP_C=")[1])
					if n, _ := pairValue(ps, "CHAP_N"); n != "host1" || r != encodeHex(chapResponse(byte(id), c.cred.Secret, ch)) || !q.Transit() || q.NSG() != 1 {
						t.Fatalf("CHAP answer %v T=%v", ps, q.Transit())
					}
					if _, ok := pairValue(ps, "CHAP_C"); ok != c.cred.mutual() {
						t.Fatalf("CHAP_C present=%v for mutual=%v", ok, c.cred.mutual())
					}
				}
			}
			if c.err != nil {
				var pe *ProtocolError
				if !errors.Is(err, c.err) || !errors.As(err, &pe) || !done {
					t.Fatalf("error %v (done=%v), want %v", err, done, c.err)
				}
				for _, w := range c.words {
					if !strings.Contains(pe.Reason, w) {
						t.Errorf("reason %q does not mention %q", pe.Reason, w)
					}
				}
				return
			}
			if err != nil || done {
				t.Fatalf("done=%v err=%v", done, err)
			}
			q, ps = decodeReq(t, req)
			if q.CSG() != 1 || q.NSG() != 3 || !q.Transit() {
				t.Fatalf("operational request CSG=%d NSG=%d T=%v", q.CSG(), q.NSG(), q.Transit())
			}
			if v, _ := pairValue(ps, "RDMAExtensions"); v != "Yes" {
				t.Fatalf("operational request %v", ps)
			}
		})
	}
}
