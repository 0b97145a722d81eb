package iser

import (
	"bytes"
	"errors"
	"testing"
)

// goldenCtrl is an iSER header built by hand from RFC 7145 section 9.1 as the
// Linux initiator sends it for a SCSI Read: opcode 0x1, R set, Read STag
// 0x11223344 at VA 0x00007f0012345000, the Write fields zero.
var goldenCtrl = []byte{
	0x14, 0x00, 0x00, 0x00, // opcode 1, R
	0x00, 0x00, 0x00, 0x00, // Write STag
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // Write Base Offset
	0x11, 0x22, 0x33, 0x44, // Read STag
	0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x50, 0x00, // Read Base Offset
}

func TestHeaderGolden(t *testing.T) {
	msg := append(bytes.Clone(goldenCtrl), 0x01, 0x02) // an iSCSI PDU would follow
	h, pdu, err := ParseHeader(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := HeaderFields{ReadValid: true, ReadSTag: 0x11223344, ReadBaseOffset: 0x00007f0012345000}
	if got := h.Fields(); got != want {
		t.Fatalf("Fields = %+v, want %+v", got, want)
	}
	if h.Opcode() != OpISCSIControl || !bytes.Equal(pdu, []byte{1, 2}) {
		t.Fatalf("opcode %v, pdu %x", h.Opcode(), pdu)
	}
	var b [HeaderLen]byte
	if n, err := want.Encode(b[:]); err != nil || n != HeaderLen || !bytes.Equal(b[:], goldenCtrl) {
		t.Fatalf("Encode = %d, %v, %x", n, err, b)
	}
}

func TestHeaderAccessors(t *testing.T) {
	tests := []struct {
		name string
		f    HeaderFields
		b0   byte
	}{
		{"none", HeaderFields{}, 0x10},
		{"write", HeaderFields{WriteValid: true, WriteSTag: 0xdeadbeef, WriteBaseOffset: 0x0102030405060708}, 0x18},
		{"read", HeaderFields{ReadValid: true, ReadSTag: 1, ReadBaseOffset: 1 << 63}, 0x14},
		{"bidi", HeaderFields{true, 0xffffffff, ^uint64(0), true, 0x80000000, 42}, 0x1c},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b [HeaderLen + 4]byte
			n, err := tt.f.Encode(b[:])
			if err != nil || n != HeaderLen {
				t.Fatal(n, err)
			}
			if b[0] != tt.b0 || b[1]|b[2]|b[3] != 0 {
				t.Fatalf("octets 0-3 = %x", b[:4])
			}
			h, rest, err := ParseHeader(b[:])
			if err != nil || len(rest) != 4 {
				t.Fatal(err, len(rest))
			}
			if h.Fields() != tt.f {
				t.Fatalf("round trip %+v != %+v", h.Fields(), tt.f)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) error
		in    []byte
		want  error
	}{
		{"header empty", hdrErr, nil, ErrShort},
		{"header short", hdrErr, goldenCtrl[:HeaderLen-1], ErrShort},
		{"header opcode 0", hdrErr, make([]byte, HeaderLen), ErrUnknownOpcode},
		{"header opcode 4", hdrErr, append([]byte{0x40}, make([]byte, HeaderLen)...), ErrUnknownOpcode},
		{"header is hello", hdrErr, append([]byte{0x20}, make([]byte, HeaderLen)...), ErrWrongOpcode},
		{"hello short", helloErr, []byte{0x20, 0x11, 0, 4}, ErrShort},
		{"hello wrong", helloErr, goldenCtrl, ErrWrongOpcode},
		{"hello unknown", helloErr, make([]byte, HelloLen), ErrUnknownOpcode},
		{"reply short", replyErr, []byte{0x30}, ErrShort},
		{"reply wrong", replyErr, goldenHello, ErrWrongOpcode},
		{"reply empty", replyErr, nil, ErrShort},
		{"cm short", cmErr, []byte{0x80, 0, 0}, ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.parse(tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func hdrErr(b []byte) error   { _, _, err := ParseHeader(b); return err }
func helloErr(b []byte) error { _, err := ParseHello(b); return err }
func replyErr(b []byte) error { _, err := ParseHelloReply(b); return err }
func cmErr(b []byte) error    { _, err := ParseCMHeader(b); return err }

// goldenHello is a Hello built by hand from RFC 7145 section 9.2: opcode 0x2,
// MaxVer 0xA, MinVer 0xA, iSER-IRD 16.
var goldenHello = []byte{0x20, 0xaa, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0, 0}

// goldenReply is a HelloReply built by hand from RFC 7145 section 9.3:
// opcode 0x3, Reject set, MaxVer 0xA, CurVer 0xA, iSER-ORD 8.
var goldenReply = []byte{0x31, 0xaa, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 0}

func TestHelloGolden(t *testing.T) {
	h, err := ParseHello(goldenHello)
	if err != nil {
		t.Fatal(err)
	}
	want := HelloFields{MaxVer: Version, MinVer: Version, IRD: 16}
	if h.Fields() != want {
		t.Fatalf("%+v", h.Fields())
	}
	var b [HelloLen]byte
	for i := range b {
		b[i] = 0xff // reserved octets must come out zero
	}
	if n, err := want.Encode(b[:]); err != nil || n != HelloLen || !bytes.Equal(b[:], goldenHello) {
		t.Fatalf("Encode = %d, %v, %x", n, err, b)
	}

	r, err := ParseHelloReply(goldenReply)
	if err != nil {
		t.Fatal(err)
	}
	wantR := HelloReplyFields{Reject: true, MaxVer: Version, CurVer: Version, ORD: 8}
	if r.Fields() != wantR {
		t.Fatalf("%+v", r.Fields())
	}
	if n, err := wantR.Encode(b[:]); err != nil || n != HelloLen || !bytes.Equal(b[:], goldenReply) {
		t.Fatalf("Encode = %d, %v, %x", n, err, b)
	}
}

func TestHelloFieldsTable(t *testing.T) {
	for _, f := range []HelloFields{{}, {0xf, 0x0, 0xffff}, {0x2, 0x1, 1}} {
		var b [HelloLen]byte
		if _, err := f.Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		h, err := ParseHello(b[:])
		if err != nil || h.Fields() != f {
			t.Fatalf("%+v: %+v, %v", f, h.Fields(), err)
		}
	}
	for _, f := range []HelloReplyFields{{}, {true, 0xf, 0xf, 0xffff}, {false, 1, 1, 4}} {
		var b [HelloLen]byte
		if _, err := f.Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		h, err := ParseHelloReply(b[:])
		if err != nil || h.Fields() != f {
			t.Fatalf("%+v: %+v, %v", f, h.Fields(), err)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	var small [3]byte
	var b [HelloLen]byte
	tests := []struct {
		name string
		f    func() (int, error)
		want error
	}{
		{"header short", func() (int, error) { return HeaderFields{}.Encode(b[:]) }, ErrShortBuffer},
		{"hello short", func() (int, error) { return HelloFields{}.Encode(small[:]) }, ErrShortBuffer},
		{"hello version", func() (int, error) { return HelloFields{MaxVer: 16}.Encode(b[:]) }, ErrVersion},
		{"reply short", func() (int, error) { return HelloReplyFields{}.Encode(small[:]) }, ErrShortBuffer},
		{"reply version", func() (int, error) { return HelloReplyFields{CurVer: 16}.Encode(b[:]) }, ErrVersion},
		{"cm short", func() (int, error) { return CMFields{}.Encode(small[:]) }, ErrShortBuffer},
	}
	for _, tt := range tests {
		if n, err := tt.f(); n != 0 || err != tt.want {
			t.Errorf("%s: %d, %v", tt.name, n, err)
		}
	}
}

func TestCMHeader(t *testing.T) {
	tests := []struct {
		in   []byte
		want CMFields
	}{
		{[]byte{0xc0, 0, 0, 0}, CMFields{true, true}}, // what Linux iser sends without remote invalidation
		{[]byte{0x80, 0, 0, 0}, CMFields{ZBVANotSupported: true}},
		{[]byte{0x40, 0, 0, 0, 9, 9}, CMFields{SendInvNotSupported: true}},
		{[]byte{0x00, 0, 0, 0}, CMFields{}},
	}
	for _, tt := range tests {
		h, err := ParseCMHeader(tt.in)
		if err != nil || h.Fields() != tt.want {
			t.Fatalf("%x: %+v %v", tt.in, h.Fields(), err)
		}
		var b [CMHeaderLen]byte
		if n, err := tt.want.Encode(b[:]); err != nil || n != CMHeaderLen || !bytes.Equal(b[:], tt.in[:CMHeaderLen]) {
			t.Fatalf("Encode %x", b)
		}
	}
}

func TestOpcodeString(t *testing.T) {
	for op, s := range map[Opcode]string{OpISCSIControl: "iSCSI control-type PDU", OpHello: "iSER Hello", OpHelloReply: "iSER HelloReply", 7: "iSER opcode 7"} {
		if op.String() != s {
			t.Errorf("%d: %q", op, op.String())
		}
	}
}

var (
	sinkErr error
	sinkN   int
	sinkB   []byte
	sinkHF  HeaderFields
)

func TestZeroAllocs(t *testing.T) {
	var b [HeaderLen]byte
	tests := []struct {
		name string
		f    func()
	}{
		{"ParseHeader", func() { h, p, err := ParseHeader(goldenCtrl); sinkHF, sinkB, sinkErr = h.Fields(), p, err }},
		{"ParseHeader error", func() { _, _, sinkErr = ParseHeader(goldenHello) }},
		{"Header Encode", func() { sinkN, sinkErr = HeaderFields{ReadValid: true}.Encode(b[:]) }},
		{"ParseHello", func() { _, sinkErr = ParseHello(goldenHello) }},
		{"ParseHelloReply", func() { _, sinkErr = ParseHelloReply(goldenReply) }},
		{"Hello Encode", func() { sinkN, sinkErr = HelloFields{1, 1, 4}.Encode(b[:]) }},
		{"ParseCMHeader", func() { _, sinkErr = ParseCMHeader(goldenHello) }},
		{"CM Encode", func() { sinkN, sinkErr = CMFields{true, true}.Encode(b[:]) }},
	}
	for _, tt := range tests {
		if a := testing.AllocsPerRun(100, tt.f); a != 0 {
			t.Errorf("%s: %v allocs", tt.name, a)
		}
	}
}
