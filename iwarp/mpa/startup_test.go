package mpa

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// startupHex decodes hex digits, ignoring spaces, newlines and "|".
func startupHex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "", "|", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// The Keys of RFC 5044 7.1.1, Figure 8, as the RFC spells them in hex.
const (
	startupReqKeyHex = "4D 50 41 20 49 44 20 52 65 71 20 46 72 61 6D 65"
	startupRepKeyHex = "4D 50 41 20 49 44 20 52 65 70 20 46 72 61 6D 65"
)

func TestStartupKeysMatchRFC(t *testing.T) {
	if got := startupHex(t, startupReqKeyHex); string(got) != KeyRequest {
		t.Errorf("KeyRequest = %q, RFC hex gives %q", KeyRequest, got)
	}
	if got := startupHex(t, startupRepKeyHex); string(got) != KeyReply {
		t.Errorf("KeyReply = %q, RFC hex gives %q", KeyReply, got)
	}
	if len(KeyRequest) != StartupKeyLen || len(KeyReply) != StartupKeyLen {
		t.Error("keys are not 16 octets")
	}
}

// Golden frames, octet by octet from Figure 8 (and RFC 6581 for the IRD/ORD
// word), with the Startup value that encodes to each.
var startupGolden = []struct {
	name  string
	wire  string
	frame Startup
}{
	{
		// Revision-1 Request: no Markers, CRC, Private Data "hello".
		name: "rev1 request",
		wire: startupReqKeyHex + "| 40 | 01 | 00 05 | 68 65 6C 6C 6F",
		frame: Startup{Kind: Request, C: true, Rev: Rev1,
			PrivateData: []byte("hello")},
	},
	{
		// Revision-1 Request asking for Markers, no CRC, no Private Data.
		name:  "rev1 request M, no PD",
		wire:  startupReqKeyHex + "| 80 | 01 | 00 00",
		frame: Startup{Kind: Request, M: true, Rev: Rev1, PrivateData: []byte{}},
	},
	{
		// Revision-2 Reply: CRC, enhanced bit, IRD 16 with flag A, ORD 8
		// with flag C (zero-length RDMA Write RTR), Private Data "ok!".
		// PD_Length 7 = 4 (IRD/ORD) + 3.
		name: "rev2 reply IRD/ORD",
		wire: startupRepKeyHex + "| 50 | 02 | 00 07 | 80 10 | 80 08 | 6F 6B 21",
		frame: Startup{Kind: Reply, C: true, Enhanced: true, Rev: Rev2,
			IRDORD:      IRDORD{IRD: 16, ORD: 8, PeerToPeer: true, RTR: RTRWrite},
			PrivateData: []byte("ok!")},
	},
	{
		// Revision-1 Reply rejecting the connection, with a reason.
		name: "rev1 reject with PD",
		wire: startupRepKeyHex + "| 60 | 01 | 00 04 | 62 75 73 79",
		frame: Startup{Kind: Reply, C: true, R: true, Rev: Rev1,
			PrivateData: []byte("busy")},
	},
	{
		// Revision-2 Request offering every RTR type (B, C, D), IRD and ORD
		// at their 14-bit maximum, M and C, no ULP Private Data.
		name: "rev2 request all flags",
		wire: startupReqKeyHex + "| D0 | 02 | 00 04 | FF FF | FF FF",
		frame: Startup{Kind: Request, M: true, C: true, Enhanced: true, Rev: Rev2,
			IRDORD:      IRDORD{IRD: 0x3fff, ORD: 0x3fff, PeerToPeer: true, RTR: AllRTR},
			PrivateData: []byte{}},
	},
}

func TestStartupGolden(t *testing.T) {
	for _, tc := range startupGolden {
		t.Run(tc.name, func(t *testing.T) {
			want := startupHex(t, tc.wire)
			f := tc.frame
			if f.Len() != len(want) {
				t.Fatalf("Len = %d, want %d", f.Len(), len(want))
			}
			buf := make([]byte, len(want)+3)
			n, err := f.Encode(buf)
			if err != nil || n != len(want) {
				t.Fatalf("Encode = %d, %v", n, err)
			}
			if !bytes.Equal(buf[:n], want) {
				t.Fatalf("Encode:\n got % X\nwant % X", buf[:n], want)
			}
			app, err := f.Append([]byte{0xaa})
			if err != nil || !bytes.Equal(app, append([]byte{0xaa}, want...)) {
				t.Fatalf("Append = % X, %v", app, err)
			}

			pd, err := ParseStartupHeader(want, f.Kind, MaxPrivateData)
			if err != nil || pd != len(want)-StartupHeaderLen {
				t.Fatalf("ParseStartupHeader = %d, %v", pd, err)
			}
			s, err := ParseStartup(want, f.Kind, MaxPrivateData)
			if err != nil {
				t.Fatalf("ParseStartup: %v", err)
			}
			got := s.Startup()
			if !startupEqual(got, f) {
				t.Fatalf("ParseStartup fields\n got %+v\nwant %+v", got, f)
			}
			if s.Kind() != f.Kind || s.M() != f.M || s.C() != f.C || s.R() != f.R ||
				s.Enhanced() != f.Enhanced || s.Res() != f.Res || s.Rev() != f.Rev ||
				s.PDLength() != f.PDLength() || s.IRDORD() != f.IRDORD ||
				!bytes.Equal(s.PrivateData(), f.PrivateData) || !bytes.Equal(s.Key(), want[:16]) {
				t.Fatalf("accessors disagree with %+v", f)
			}
			if s.Rejected() != (f.Kind == Reply && f.R) {
				t.Fatalf("Rejected = %v", s.Rejected())
			}
		})
	}
}

func startupEqual(a, b Startup) bool {
	return a.Kind == b.Kind && a.M == b.M && a.C == b.C && a.R == b.R &&
		a.Enhanced == b.Enhanced && a.Res == b.Res && a.Rev == b.Rev &&
		(a.Rev != Rev2 || a.IRDORD == b.IRDORD) && bytes.Equal(a.PrivateData, b.PrivateData)
}

// TestStartupFields encodes one field or flag at a time and checks the octet
// it lands in and that it parses back.
func TestStartupFields(t *testing.T) {
	base := func() Startup { return Startup{Kind: Request, Rev: Rev1} }
	tests := []struct {
		name   string
		set    func(*Startup)
		octet  int  // index of the octet the field changes
		want   byte // its value
		verify func(StartupFrame) bool
	}{
		{"Kind Request", func(f *Startup) {}, 9, 'q', func(s StartupFrame) bool { return s.Kind() == Request }},
		{"Kind Reply", func(f *Startup) { f.Kind = Reply }, 9, 'p', func(s StartupFrame) bool { return s.Kind() == Reply }},
		{"M", func(f *Startup) { f.M = true }, 16, 0x80, StartupFrame.M},
		{"C", func(f *Startup) { f.C = true }, 16, 0x40, StartupFrame.C},
		{"R in Reply", func(f *Startup) { f.Kind, f.R = Reply, true }, 16, 0x20, StartupFrame.Rejected},
		{"R in Request kept, not a rejection", func(f *Startup) { f.R = true }, 16, 0x20,
			func(s StartupFrame) bool { return s.R() && !s.Rejected() }},
		{"Enhanced", func(f *Startup) { f.Enhanced = true }, 16, 0x10, StartupFrame.Enhanced},
		{"Res 1", func(f *Startup) { f.Res = 1 }, 16, 0x01, func(s StartupFrame) bool { return s.Res() == 1 }},
		{"Res 0xf", func(f *Startup) { f.Res = 0xf }, 16, 0x0f, func(s StartupFrame) bool { return s.Res() == 0xf }},
		{"Rev 1", func(f *Startup) {}, 17, 1, func(s StartupFrame) bool { return s.Rev() == 1 }},
		{"Rev 2", func(f *Startup) { f.Rev = Rev2 }, 17, 2, func(s StartupFrame) bool { return s.Rev() == 2 }},
		{"PD_Length high octet", func(f *Startup) { f.PrivateData = make([]byte, 300) }, 18, 0x01,
			func(s StartupFrame) bool { return s.PDLength() == 300 && len(s.PrivateData()) == 300 }},
		{"PD_Length low octet", func(f *Startup) { f.PrivateData = make([]byte, 300) }, 19, 0x2c,
			func(s StartupFrame) bool { return s.PDLength() == 300 }},
		{"PD_Length 512", func(f *Startup) { f.PrivateData = make([]byte, 512) }, 18, 0x02,
			func(s StartupFrame) bool { return s.PDLength() == 512 }},
		{"Rev 2 PD_Length counts IRD/ORD", func(f *Startup) { f.Rev, f.PrivateData = Rev2, []byte("x") }, 19, 5,
			func(s StartupFrame) bool { return s.PDLength() == 5 && string(s.PrivateData()) == "x" }},
		{"Private Data first octet", func(f *Startup) { f.PrivateData = []byte{0xee} }, 20, 0xee,
			func(s StartupFrame) bool { return s.PrivateData()[0] == 0xee }},
		{"Rev 2 ULP data after IRD/ORD", func(f *Startup) { f.Rev, f.PrivateData = Rev2, []byte{0xee} }, 24, 0xee,
			func(s StartupFrame) bool { return s.PrivateData()[0] == 0xee }},
		{"IRD", func(f *Startup) { f.Rev, f.IRDORD.IRD = Rev2, 0x1234 }, 20, 0x12,
			func(s StartupFrame) bool { return s.IRDORD().IRD == 0x1234 }},
		{"ORD", func(f *Startup) { f.Rev, f.IRDORD.ORD = Rev2, 0x2345 }, 22, 0x23,
			func(s StartupFrame) bool { return s.IRDORD().ORD == 0x2345 }},
		{"A peer-to-peer", func(f *Startup) { f.Rev, f.IRDORD.PeerToPeer = Rev2, true }, 20, 0x80,
			func(s StartupFrame) bool { return s.IRDORD().PeerToPeer }},
		{"B zero-length Send RTR", func(f *Startup) { f.Rev, f.IRDORD.RTR = Rev2, RTRSend }, 20, 0x40,
			func(s StartupFrame) bool { return s.IRDORD().RTR == RTRSend }},
		{"C zero-length Write RTR", func(f *Startup) { f.Rev, f.IRDORD.RTR = Rev2, RTRWrite }, 22, 0x80,
			func(s StartupFrame) bool { return s.IRDORD().RTR == RTRWrite }},
		{"D zero-length Read RTR", func(f *Startup) { f.Rev, f.IRDORD.RTR = Rev2, RTRRead }, 22, 0x40,
			func(s StartupFrame) bool { return s.IRDORD().RTR == RTRRead }},
		{"IRD/ORD ignored in Rev 1", func(f *Startup) { f.IRDORD = IRDORD{IRD: 5, PeerToPeer: true} }, 19, 0,
			func(s StartupFrame) bool { return s.IRDORD() == IRDORD{} && s.PDLength() == 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			tc.set(&f)
			b, err := f.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			if b[tc.octet] != tc.want {
				t.Errorf("octet %d = %#02x, want %#02x (frame % x)", tc.octet, b[tc.octet], tc.want, b)
			}
			s, err := ParseStartup(b, AnyKind, MaxPrivateData)
			if err != nil {
				t.Fatalf("ParseStartup: %v", err)
			}
			if !tc.verify(s) {
				t.Errorf("accessor check failed for % x", b)
			}
			if g := s.Startup(); !startupEqual(g, f) && !(f.Rev == Rev1 && f.IRDORD != IRDORD{}) {
				t.Errorf("round trip\n got %+v\nwant %+v", g, f)
			}
		})
	}
}

func TestIRDORDWord(t *testing.T) {
	tests := []struct {
		v    IRDORD
		wire string
	}{
		{IRDORD{}, "00 00 00 00"},
		{IRDORD{IRD: 1}, "00 01 00 00"},
		{IRDORD{ORD: 1}, "00 00 00 01"},
		{IRDORD{IRD: 128, ORD: 128}, "00 80 00 80"},
		{IRDORD{IRD: 0x3fff, ORD: 0x3fff}, "3F FF 3F FF"},
		{IRDORD{PeerToPeer: true}, "80 00 00 00"},
		{IRDORD{RTR: RTRSend}, "40 00 00 00"},
		{IRDORD{RTR: RTRWrite}, "00 00 80 00"},
		{IRDORD{RTR: RTRRead}, "00 00 40 00"},
		{IRDORD{IRD: 0x3fff, ORD: 0x3fff, PeerToPeer: true, RTR: AllRTR}, "FF FF FF FF"},
		{IRDORD{IRD: 16, ORD: 8, PeerToPeer: true, RTR: RTRWrite | RTRRead}, "80 10 C0 08"},
	}
	for _, tc := range tests {
		want := startupHex(t, tc.wire)
		got := make([]byte, 4)
		tc.v.Put(got)
		if !bytes.Equal(got, want) {
			t.Errorf("%+v.Put = % X, want % X", tc.v, got, want)
		}
		if p := ParseIRDORD(want); p != tc.v {
			t.Errorf("ParseIRDORD(% X) = %+v, want %+v", want, p, tc.v)
		}
	}
	// Out-of-range values are masked to 14 bits and extra RTR bits dropped.
	b := make([]byte, 4)
	IRDORD{IRD: 0xffff, ORD: 0x4001, RTR: 0xf0}.Put(b)
	if !bytes.Equal(b, startupHex(t, "3F FF 00 01")) {
		t.Errorf("masked Put = % X", b)
	}
	// Short buffers: no panic, nothing written, zero value read.
	IRDORD{IRD: 1}.Put(b[:3])
	if ParseIRDORD(b[:3]) != (IRDORD{}) {
		t.Error("ParseIRDORD of 3 octets is not the zero value")
	}
}

func TestRTRString(t *testing.T) {
	for r, want := range map[RTR]string{0: "none", RTRSend: "Send", RTRWrite | RTRRead: "Write|Read", AllRTR | 0x80: "Send|Write|Read|0x80"} {
		if got := r.String(); got != want {
			t.Errorf("RTR(%#x).String() = %q, want %q", uint8(r), got, want)
		}
	}
	for k, want := range map[StartupKind]string{AnyKind: "any", Request: "MPA Request", Reply: "MPA Reply", 9: "StartupKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("StartupKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// startupFrameBytes builds a frame from raw parts, to make invalid ones.
func startupFrameBytes(key string, flags, rev byte, pdLen uint16, pd []byte) []byte {
	b := append([]byte(key), flags, rev, byte(pdLen>>8), byte(pdLen))
	return append(b, pd...)
}

var startupSentinels = []error{
	ErrStartupKey, ErrInitiatorInitiator, ErrUnexpectedReply, ErrStartupRevision,
	ErrPDLength, ErrPDLimit, ErrStartupTruncated, ErrNoIRDORD,
}

func TestStartupErrors(t *testing.T) {
	valid := startupFrameBytes(KeyRequest, 0x40, 1, 3, []byte("abc"))
	tests := []struct {
		name       string
		b          []byte
		expect     StartupKind
		limit      int
		want       error
		headerOnly bool // the 20-octet part is valid; only ParseStartup fails
	}{
		{"empty", nil, Request, 512, ErrStartupTruncated, false},
		{"19 octets", valid[:19], Request, 512, ErrStartupTruncated, false},
		{"garbage key", startupFrameBytes("GET / HTTP/1.1\r\n", 0, 1, 0, nil), Request, 512, ErrStartupKey, false},
		{"key one octet off", startupFrameBytes("MPA ID Rex Frame", 0, 1, 0, nil), AnyKind, 512, ErrStartupKey, false},
		{"lower-case key", startupFrameBytes("mpa id req frame", 0, 1, 0, nil), Request, 512, ErrStartupKey, false},
		{"Request where Reply expected (Initiator/Initiator)", valid, Reply, 512, ErrInitiatorInitiator, false},
		{"Reply where Request expected", startupFrameBytes(KeyReply, 0, 1, 0, nil), Request, 512, ErrUnexpectedReply, false},
		{"Rev 0", startupFrameBytes(KeyRequest, 0, 0, 0, nil), Request, 512, ErrStartupRevision, false},
		{"Rev 3", startupFrameBytes(KeyReply, 0, 3, 0, nil), Reply, 512, ErrStartupRevision, false},
		{"Rev 255", startupFrameBytes(KeyReply, 0, 255, 0, nil), AnyKind, 512, ErrStartupRevision, false},
		{"PD_Length 513", startupFrameBytes(KeyRequest, 0, 1, 513, make([]byte, 513)), Request, 1 << 20, ErrPDLength, false},
		{"PD_Length 0xffff", startupFrameBytes(KeyRequest, 0, 2, 0xffff, nil), Request, 1 << 20, ErrPDLength, false},
		{"PD_Length over buffer", startupFrameBytes(KeyRequest, 0, 1, 257, make([]byte, 257)), Request, 256, ErrPDLimit, false},
		{"PD_Length with zero buffer", valid, Request, 0, ErrPDLimit, false},
		{"negative limit is zero", valid, Request, -1, ErrPDLimit, false},
		{"PD shorter than PD_Length", valid[:22], Request, 512, ErrStartupTruncated, true},
		{"PD missing", valid[:20], Request, 512, ErrStartupTruncated, true},
		{"Rev 2 PD_Length 0", startupFrameBytes(KeyReply, 0x10, 2, 0, nil), Reply, 512, ErrNoIRDORD, false},
		{"Rev 2 PD_Length 3", startupFrameBytes(KeyReply, 0x10, 2, 3, []byte{1, 2, 3}), Reply, 512, ErrNoIRDORD, false},
		{"Rev 2 IRD/ORD truncated", startupFrameBytes(KeyReply, 0x10, 2, 4, []byte{1, 2}), Reply, 512, ErrStartupTruncated, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, herr := ParseStartupHeader(tc.b, tc.expect, tc.limit)
			s, err := ParseStartup(tc.b, tc.expect, tc.limit)
			if tc.headerOnly {
				if herr != nil {
					t.Fatalf("ParseStartupHeader: %v", herr)
				}
				if n != int(tc.b[18])<<8|int(tc.b[19]) {
					t.Fatalf("ParseStartupHeader = %d", n)
				}
			} else if !errors.Is(herr, tc.want) {
				t.Fatalf("ParseStartupHeader error = %v, want %v", herr, tc.want)
			}
			if s != nil || !errors.Is(err, tc.want) {
				t.Fatalf("ParseStartup = %v, %v; want %v", s, err, tc.want)
			}
			if CodeOf(err) != CodeStartup {
				t.Errorf("CodeOf = %v, want %v", CodeOf(err), CodeStartup)
			}
			for _, other := range startupSentinels {
				if other != tc.want && errors.Is(err, other) {
					t.Errorf("%v also matches %v", err, other)
				}
			}
		})
	}
}

// TestStartupNotChecked: Res, the enhanced bit and R in a Request are not
// checked on reception (RFC 5044 7.1.1).
func TestStartupNotChecked(t *testing.T) {
	for _, flags := range []byte{0x00, 0x0f, 0x10, 0x1f, 0x20, 0xff} {
		for _, rev := range []byte{1, 2} {
			b := startupFrameBytes(KeyRequest, flags, rev, 4, []byte{0, 1, 0, 2})
			s, err := ParseStartup(b, Request, MaxPrivateData)
			if err != nil {
				t.Fatalf("flags %#x rev %d: %v", flags, rev, err)
			}
			if s.Rejected() {
				t.Errorf("flags %#x: a Request is never a rejection", flags)
			}
			if f := s.Startup(); f.Res != flags&0x0f || f.Enhanced != (flags&0x10 != 0) {
				t.Errorf("flags %#x: Res %#x Enhanced %v", flags, f.Res, f.Enhanced)
			}
		}
	}
}

// TestStartupStream reads a frame the way an engine does: the fixed part,
// then PD_Length more octets; octets after the frame are not consumed.
func TestStartupStream(t *testing.T) {
	f := Startup{Kind: Reply, C: true, Enhanced: true, Rev: Rev2,
		IRDORD: IRDORD{IRD: 4, ORD: 4}, PrivateData: []byte("private")}
	wire, err := f.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	stream := append(wire, "first FPDU"...)
	r := bytes.NewReader(stream)

	buf := make([]byte, MaxStartupFrame)
	if _, err := io.ReadFull(r, buf[:StartupHeaderLen]); err != nil {
		t.Fatal(err)
	}
	n, err := ParseStartupHeader(buf[:StartupHeaderLen], Reply, MaxPrivateData)
	if err != nil || n != 4+len("private") {
		t.Fatalf("ParseStartupHeader = %d, %v", n, err)
	}
	// Too early: the Private Data is not there yet.
	if _, err := ParseStartup(buf[:StartupHeaderLen+n-1], Reply, MaxPrivateData); !errors.Is(err, ErrStartupTruncated) {
		t.Fatalf("partial frame: %v", err)
	}
	if _, err := io.ReadFull(r, buf[StartupHeaderLen:StartupHeaderLen+n]); err != nil {
		t.Fatal(err)
	}
	s, err := ParseStartup(buf[:StartupHeaderLen+n], Reply, MaxPrivateData)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.PrivateData()) != "private" || s.IRDORD() != f.IRDORD {
		t.Fatalf("got PD %q IRD/ORD %+v", s.PrivateData(), s.IRDORD())
	}
	// With the whole stream at hand, the frame ends where PD_Length says.
	s2, err := ParseStartup(stream, Reply, MaxPrivateData)
	if err != nil || len(s2) != len(wire) {
		t.Fatalf("ParseStartup(stream) = %d octets, %v; want %d", len(s2), err, len(wire))
	}
	if &s2[0] != &stream[0] {
		t.Error("ParseStartup copied the frame")
	}
	if pd := s2.Startup().PrivateData; &pd[0] != &stream[StartupHeaderLen+IRDORDLen] {
		t.Error("Private Data does not alias the input")
	}
}

func TestStartupEncodeErrors(t *testing.T) {
	ok := Startup{Kind: Request, Rev: Rev1}
	tests := []struct {
		name string
		set  func(*Startup)
	}{
		{"no Kind", func(f *Startup) { f.Kind = AnyKind }},
		{"bad Kind", func(f *Startup) { f.Kind = 7 }},
		{"Rev 0", func(f *Startup) { f.Rev = 0 }},
		{"Rev 3", func(f *Startup) { f.Rev = 3 }},
		{"Res beyond its 4 bits", func(f *Startup) { f.Res = 0x10 }},
		{"Rev 1 PD 513", func(f *Startup) { f.PrivateData = make([]byte, 513) }},
		{"Rev 2 PD 509", func(f *Startup) { f.Rev, f.PrivateData = Rev2, make([]byte, 509) }},
		{"IRD over 14 bits", func(f *Startup) { f.Rev, f.IRDORD.IRD = Rev2, 0x4000 }},
		{"ORD over 14 bits", func(f *Startup) { f.Rev, f.IRDORD.ORD = Rev2, 0x4000 }},
		{"unknown RTR bit", func(f *Startup) { f.Rev, f.IRDORD.RTR = Rev2, 0x08 }},
	}
	for _, tc := range tests {
		f := ok
		tc.set(&f)
		if _, err := f.Encode(make([]byte, 1024)); !errors.Is(err, ErrStartupEncode) {
			t.Errorf("%s: Encode error = %v", tc.name, err)
		}
		b, err := f.Append([]byte{1, 2})
		if !errors.Is(err, ErrStartupEncode) || !bytes.Equal(b, []byte{1, 2}) {
			t.Errorf("%s: Append = % x, %v", tc.name, b, err)
		}
	}
	// The limits themselves encode.
	for _, f := range []Startup{
		{Kind: Request, Rev: Rev1, PrivateData: make([]byte, 512)},
		{Kind: Reply, Rev: Rev2, PrivateData: make([]byte, 508), IRDORD: IRDORD{IRD: 0x3fff, ORD: 0x3fff}},
	} {
		if b, err := f.Append(nil); err != nil || len(b) != MaxStartupFrame {
			t.Errorf("%d octets of PD: %d, %v", len(f.PrivateData), len(b), err)
		}
	}
	// A buffer one octet short.
	f := Startup{Kind: Reply, Rev: Rev1, PrivateData: []byte("abc")}
	if _, err := f.Encode(make([]byte, f.Len()-1)); !errors.Is(err, io.ErrShortBuffer) {
		t.Errorf("short buffer: %v", err)
	}
}

func TestStartupAllocatesNothing(t *testing.T) {
	f := Startup{Kind: Reply, C: true, Enhanced: true, Rev: Rev2,
		IRDORD: IRDORD{IRD: 128, ORD: 128, PeerToPeer: true, RTR: RTRWrite}, PrivateData: make([]byte, 200)}
	wire, err := f.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, MaxStartupFrame)
	var sink int
	allocs := testing.AllocsPerRun(200, func() {
		n, err := ParseStartupHeader(wire, Reply, MaxPrivateData)
		if err != nil {
			panic(err)
		}
		s, err := ParseStartup(wire, Reply, MaxPrivateData)
		if err != nil {
			panic(err)
		}
		g := s.Startup()
		w := s.IRDORD()
		sink += n + len(g.PrivateData) + int(w.IRD) + len(s.PrivateData()) + s.PDLength()
		if s.Rejected() || !s.C() || s.Kind() != Reply {
			panic("fields")
		}
		if _, err := g.Encode(out); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decoding and encoding allocate %v times per frame", allocs)
	}
	_ = sink
}

// FuzzStartupFrame decodes arbitrary octets as a Startup frame: it must not
// panic, whatever decodes must encode back to the same octets, and
// negotiating with what decodes must not panic either.
func FuzzStartupFrame(f *testing.F) {
	for _, tc := range startupGolden {
		f.Add(startupHex(f, tc.wire))
	}
	f.Add(startupFrameBytes("GET / HTTP/1.1\r\n", 0, 1, 0, nil))
	f.Add(startupFrameBytes(KeyRequest, 0, 1, 513, nil))
	f.Add(startupFrameBytes(KeyReply, 0x10, 2, 2, []byte{0x80, 0x01}))
	configs := []StartupConfig{
		{},
		{Revision: Rev1, NoCRC: true},
		{Markers: true, RefuseMarkers: true, IRD: 128, ORD: 128, PeerToPeer: true},
		{IRD: IRDORDUnspecified, ORD: 0xffff, PeerToPeer: true, RTR: RTRSend},
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range []StartupKind{AnyKind, Request, Reply} {
			for _, limit := range []int{MaxPrivateData, 256, 0} {
				n, herr := ParseStartupHeader(b, kind, limit)
				s, err := ParseStartup(b, kind, limit)
				if herr != nil {
					if err == nil || CodeOf(herr) != CodeStartup || CodeOf(err) != CodeStartup {
						t.Fatalf("header error %v, frame error %v", herr, err)
					}
					continue
				}
				if n < 0 || n > limit || n > MaxPrivateData {
					t.Fatalf("PD_Length %d with limit %d", n, limit)
				}
				if err != nil {
					if !errors.Is(err, ErrStartupTruncated) || len(b) >= StartupHeaderLen+n {
						t.Fatalf("header ok (PD_Length %d, %d octets) but %v", n, len(b), err)
					}
					continue
				}
				if len(s) != StartupHeaderLen+n || !bytes.Equal(s, b[:len(s)]) {
					t.Fatalf("frame is %d octets, want %d", len(s), StartupHeaderLen+n)
				}
				fr := s.Startup()
				if kind != AnyKind && fr.Kind != kind {
					t.Fatalf("kind %v, expected %v", fr.Kind, kind)
				}
				enc, err := fr.Append(nil)
				if err != nil {
					t.Fatalf("re-encoding %+v: %v", fr, err)
				}
				if !bytes.Equal(enc, s) {
					t.Fatalf("re-encoded\n got % x\nwant % x", enc, []byte(s))
				}
				if kind == AnyKind {
					continue
				}
				role := Initiator
				if fr.Kind == Request {
					role = Responder
				}
				for i := range configs {
					neg, err := Negotiate(role, &configs[i], &fr)
					if err != nil && CodeOf(err) == 0 && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrMarkersRefused) {
						t.Fatalf("Negotiate: unexpected error %v", err)
					}
					if role == Responder {
						rep := neg.Reply(err != nil, []byte("x"))
						if _, err := rep.Append(nil); err != nil {
							t.Fatalf("Reply %+v does not encode: %v", rep, err)
						}
					}
				}
			}
		}
	})
}

// TestStartupSeedCorpus checks that the committed seed corpus of
// FuzzStartupFrame holds the frames its file names promise.
func TestStartupSeedCorpus(t *testing.T) {
	want := map[string]error{
		"rev1-request":               nil,
		"rev2-reply-ird-ord":         nil,
		"rev2-request-siw":           nil,
		"reject-with-private-data":   nil,
		"rev2-reject-with-pd":        nil,
		"reserved-bits-set":          nil,
		"rev2-all-flags-max-ird-ord": nil,
		"bad-key":                    ErrStartupKey,
		"pd-length-513":              ErrPDLength,
		"rev2-pd-length-3":           ErrNoIRDORD,
		"truncated-private-data":     ErrStartupTruncated,
		"rev3":                       ErrStartupRevision,
	}
	for name, wantErr := range want {
		raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzStartupFrame", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
			!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			t.Fatalf("%s: not a one-value corpus file: %q", name, raw)
		}
		b, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, err := ParseStartup([]byte(b), AnyKind, MaxPrivateData)
		if !errors.Is(err, wantErr) || (wantErr == nil) != (s != nil) {
			t.Errorf("%s: ParseStartup error %v, want %v", name, err, wantErr)
		}
		if s != nil && name == "rev2-reply-ird-ord" {
			if w := s.IRDORD(); w != (IRDORD{IRD: 16, ORD: 8, PeerToPeer: true, RTR: RTRWrite}) || string(s.PrivateData()) != "ok!" {
				t.Errorf("%s: %+v %q", name, w, s.PrivateData())
			}
		}
		if s != nil && name == "reject-with-private-data" && (!s.Rejected() || string(s.PrivateData()) != "busy") {
			t.Errorf("%s: Rejected %v PD %q", name, s.Rejected(), s.PrivateData())
		}
	}
}
