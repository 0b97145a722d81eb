package login

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// fuzzTargetConfig is the configuration FuzzTargetStep logs in to: iqnTarget
// with mutual CHAP, iqnOther with none, and Discovery with one-way CHAP;
// iSER, or Traditional with CRC32C allowed for the header digest. Its
// random source is fixed, so recorded logins replay.
func fuzzTargetConfig(traditional bool) *TargetConfig {
	cfg := targetCfg(&TargetPolicy{CHAP: mutual, Alias: "fuzz", Initiators: []string{iqnInit}})
	cfg.Discovery = oneWay
	if traditional {
		cfg.Traditional = true
		cfg.Offer.HeaderDigest = true
	}
	return cfg
}

// splitPDUs cuts a fuzz input into PDUs, each preceded by its length as a
// 16-bit big-endian number.
func splitPDUs(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < 2*maxExchanges {
		if len(data) < 2 {
			return append(out, data)
		}
		n := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		n = min(n, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// joinPDUs is the inverse of splitPDUs, for seeds.
func joinPDUs(pdus [][]byte) []byte {
	var out []byte
	for _, p := range pdus {
		out = binary.BigEndian.AppendUint16(out, uint16(len(p)))
		out = append(out, p...)
	}
	return out
}

// FuzzTargetStep feeds arbitrary Login Request sequences to a Target, an
// iSER one and a Traditional one: it must never panic, must append exactly
// one well-formed Login Response per Step until done, report failures as
// *StatusError matching the response status, and nothing after done; a
// Normal session ends with RDMAExtensions=Yes on iSER and No on
// Traditional. Seeds (testdata/fuzz/FuzzTargetStep): recorded logins of
// every kind, successful and failing, iSER and traditional (trad_*).
func FuzzTargetStep(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzTarget(t, data, false)
		fuzzTarget(t, data, true)
	})
}

// fuzzTarget runs one FuzzTargetStep input against a Target.
func fuzzTarget(t *testing.T, data []byte, traditional bool) {
	tg := NewTarget(fuzzTargetConfig(traditional))
	done := false
	for _, req := range splitPDUs(data) {
		out, d, err := tg.Step([]byte{0xee}, req)
		if done {
			if len(out) != 1 || !d || !errors.Is(err, ErrFinished) {
				t.Fatalf("Step after done: %d octets, %v, %v", len(out), d, err)
			}
			continue
		}
		if len(out) < 1 || out[0] != 0xee {
			t.Fatal("dst prefix lost")
		}
		resp := out[1:]
		checkResponse(t, resp)
		r, _ := iscsi.AsLoginResp(iscsi.BHS(resp[:iscsi.BHSLen]))
		if len(req) >= iscsi.BHSLen && r.ITT() != iscsi.BHS(req[:iscsi.BHSLen]).ITT() && err == nil {
			t.Fatalf("ITT 0x%x not echoed", r.ITT())
		}
		status := Status(uint16(r.StatusClass())<<8 | uint16(r.StatusDetail()))
		switch {
		case err != nil:
			var se *StatusError
			if !errors.As(err, &se) || se.Status() != status || status.Class() == 0 || !d {
				t.Fatalf("error %v (done=%v) with response status 0x%04x", err, d, uint16(status))
			}
		case d:
			if status != 0 || !r.Transit() || r.NSG() != StageFullFeature || r.TSIH() == 0 || tg.Result().TSIH != r.TSIH() {
				t.Fatalf("final response T=%v NSG=%d TSIH %d status 0x%04x", r.Transit(), r.NSG(), r.TSIH(), uint16(status))
			}
			if res := tg.Result(); res.SessionType == SessionNormal && (res.Params.RDMAExtensions == traditional || res.Policy == nil) {
				t.Fatalf("Normal session on a Traditional=%v target with RDMAExtensions=%v or without policy: %+v", traditional, res.Params.RDMAExtensions, res)
			}
			if res := tg.Result(); (res.Params.HeaderDigest || res.Params.DataDigest) && (!traditional || res.Params.DataDigest) {
				t.Fatalf("digests the Traditional=%v target does not support: %+v", traditional, res.Params)
			}
		default:
			if status != 0 || r.TSIH() != 0 || r.Continue() {
				t.Fatalf("partial response status 0x%04x TSIH %d C=%v", uint16(status), r.TSIH(), r.Continue())
			}
		}
		done = d
	}
}

// TestTraditionalSeeds replays the recorded traditional logins of the
// FuzzTargetStep corpus, so the seeds keep reaching the end of a login
// rather than failing early as the code changes: each ends as recorded.
func TestTraditionalSeeds(t *testing.T) {
	for _, c := range []struct {
		name        string
		traditional bool   // the target replayed against
		status      Status // 0: the login succeeds
		session     string
		header      bool // HeaderDigest CRC32C in the Result
	}{
		{"trad_none", true, 0, SessionNormal, false},
		{"trad_crc32c", true, 0, SessionNormal, true},
		{"trad_mutual", true, 0, SessionNormal, false},
		{"trad_values", true, 0, SessionNormal, false},
		{"trad_discovery", true, 0, SessionDiscovery, true},
		{"trad_iser_initiator", true, 0, SessionNormal, false},
		{"trad_to_iser_target", false, StatusInitiatorError, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzTargetStep", c.name))
			if err != nil {
				t.Fatal(err)
			}
			lit, ok := strings.CutPrefix(strings.TrimSpace(string(raw)), "go test fuzz v1\n[]byte(")
			if !ok || !strings.HasSuffix(lit, ")") {
				t.Fatalf("not a fuzz corpus file: %q", raw)
			}
			data, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
			if err != nil {
				t.Fatal(err)
			}
			tg := NewTarget(fuzzTargetConfig(c.traditional))
			pdus := splitPDUs([]byte(data))
			for k, req := range pdus {
				_, done, err := tg.Step(nil, req)
				if k < len(pdus)-1 {
					if done || err != nil {
						t.Fatalf("request %d of %d: done=%v err=%v", k, len(pdus), done, err)
					}
					continue
				}
				if !done {
					t.Fatal("not done after the last request")
				}
				if c.status != 0 {
					wantStatus(t, err, c.status)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			res := tg.Result()
			if res.SessionType != c.session || res.Params.RDMAExtensions || res.Params.HeaderDigest != c.header || res.Params.DataDigest {
				t.Errorf("%s, params %+v", res.SessionType, res.Params)
			}
		})
	}
}

// FuzzParseSendTargets checks that ParseSendTargets never panics and that
// what it accepts survives AppendSendTargets and a second parse unchanged.
// Seeds: testdata/fuzz/FuzzParseSendTargets.
func FuzzParseSendTargets(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseSendTargets(data)
		if err != nil {
			if got != nil {
				t.Fatal("targets alongside an error")
			}
			return
		}
		text, err := AppendSendTargets(nil, SendTargetsAll, got)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", got, err)
		}
		again, err := ParseSendTargets(text)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip: %+v, %v\nwant %+v", again, err, got)
		}
	})
}

// TestSplitPDUs checks the framing of the FuzzTargetStep inputs: PDUs
// joined with their lengths split back, and a truncated tail is kept.
func TestSplitPDUs(t *testing.T) {
	pdus := [][]byte{op(opBase).bytes(), {}, []byte("x")}
	if got := splitPDUs(joinPDUs(pdus)); !reflect.DeepEqual(got, pdus) {
		t.Errorf("split(join) = %q", got)
	}
	// 0x0009 asks for 9 octets but 3 remain: they are the PDU; a lone
	// octet is a PDU too.
	if got := splitPDUs([]byte{0, 9, 'a', 'b', 7}); len(got) != 1 || string(got[0]) != "ab\x07" {
		t.Errorf("truncated: %q", got)
	}
	if got := splitPDUs([]byte{0, 1, 'a', 5}); len(got) != 2 || string(got[1]) != "\x05" {
		t.Errorf("lone octet: %q", got)
	}
}
