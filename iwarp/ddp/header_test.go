package ddp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// rfc5044Send is the DDP Segment inside the FPDU of RFC 5044 section 4.4,
// Figure 5: an untagged Send (RDMAP RV 1, opcode 3) with L set to queue 0,
// MSN 1, MO 0, followed by 24 octets of zeros.
func rfc5044Send() []byte {
	b, err := hex.DecodeString("4143" + "00000000" + "00000000" + "00000001" + "00000000")
	if err != nil {
		panic(err)
	}
	return append(b, make([]byte, 24)...)
}

func TestRFC5044Example(t *testing.T) {
	seg := rfc5044Send()
	h, payload, err := Parse(seg)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Len", h.Len(), UntaggedHeaderLen},
		{"T", h.Tagged(), false},
		{"L", h.Last(), true},
		{"DV", h.DV(), uint8(1)},
		{"RsvdULP", h.RsvdULP(), uint8(0x43)},
		{"RsvdULP32", h.RsvdULP32(), uint32(0)},
		{"QN", h.QN(), uint32(0)},
		{"MSN", h.MSN(), uint32(1)},
		{"MO", h.MO(), uint32(0)},
		{"payload", len(payload), 24},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	var b [UntaggedHeaderLen]byte
	n, err := UntaggedFields{Last: true, RsvdULP: 0x43, QN: 0, MSN: 1, MO: 0}.Encode(b[:])
	if err != nil || n != UntaggedHeaderLen {
		t.Fatalf("Encode = %d, %v", n, err)
	}
	if !bytes.Equal(b[:], seg[:UntaggedHeaderLen]) {
		t.Errorf("Encode = % x, want % x", b[:], seg[:UntaggedHeaderLen])
	}
}

func TestControl(t *testing.T) {
	tests := []struct {
		c            Control
		tagged, last bool
		dv           uint8
		hdrLen       int
		versionErr   error
		make         bool // whether MakeControl(tagged, last) == c
	}{
		{0x01, false, false, 1, UntaggedHeaderLen, nil, true},
		{0x41, false, true, 1, UntaggedHeaderLen, nil, true},
		{0x81, true, false, 1, TaggedHeaderLen, nil, true},
		{0xc1, true, true, 1, TaggedHeaderLen, nil, true},
		// Reserved bits are not checked on receive (4.1).
		{0xfd, true, true, 1, TaggedHeaderLen, nil, false},
		{0x3d, false, false, 1, UntaggedHeaderLen, nil, false},
		// Every other DV is an Invalid DDP version of the segment's model.
		{0x80, true, false, 0, TaggedHeaderLen, ErrTaggedVersion, false},
		{0xc2, true, true, 2, TaggedHeaderLen, ErrTaggedVersion, false},
		{0x83, true, false, 3, TaggedHeaderLen, ErrTaggedVersion, false},
		{0x00, false, false, 0, UntaggedHeaderLen, ErrUntaggedVersion, false},
		{0x42, false, true, 2, UntaggedHeaderLen, ErrUntaggedVersion, false},
		{0x03, false, false, 3, UntaggedHeaderLen, ErrUntaggedVersion, false},
	}
	for _, tt := range tests {
		c := tt.c
		if c.Tagged() != tt.tagged || c.Last() != tt.last || c.DV() != tt.dv || c.HeaderLen() != tt.hdrLen {
			t.Errorf("%#02x: T=%v L=%v DV=%d len=%d, want %v %v %d %d",
				uint8(c), c.Tagged(), c.Last(), c.DV(), c.HeaderLen(), tt.tagged, tt.last, tt.dv, tt.hdrLen)
		}
		if err := CheckVersion(c); err != tt.versionErr {
			t.Errorf("CheckVersion(%#02x) = %v, want %v", uint8(c), err, tt.versionErr)
		}
		if got := MakeControl(tt.tagged, tt.last) == c; got != tt.make {
			t.Errorf("MakeControl(%v, %v) == %#02x is %v", tt.tagged, tt.last, uint8(c), got)
		}
	}
}

func TestParse(t *testing.T) {
	tagged := func(n int) []byte { b := make([]byte, n); b[0] = 0x81; return b }
	untagged := func(n int) []byte { b := make([]byte, n); b[0] = 0x01; return b }
	withCtl := func(c byte, b []byte) []byte { b[0] = c; return b }
	tests := []struct {
		name    string
		seg     []byte
		err     error
		hdrLen  int
		payload int
	}{
		{"nil", nil, ErrShortHeader, 0, 0},
		{"empty", []byte{}, ErrShortHeader, 0, 0},
		{"tagged control only", tagged(1), ErrShortHeader, 0, 0},
		{"tagged 13", tagged(13), ErrShortHeader, 0, 0},
		{"tagged exact", tagged(14), nil, 14, 0},
		{"tagged +1", tagged(15), nil, 14, 1},
		{"tagged 14+1500", tagged(1514), nil, 14, 1500},
		{"untagged control only", untagged(1), ErrShortHeader, 0, 0},
		{"untagged 14", untagged(14), ErrShortHeader, 0, 0},
		{"untagged 17", untagged(17), ErrShortHeader, 0, 0},
		{"untagged exact", untagged(18), nil, 18, 0},
		{"untagged +1", untagged(19), nil, 18, 1},
		{"rfc5044", rfc5044Send(), nil, 18, 24},
		{"reserved bits ignored", withCtl(0xfd, tagged(20)), nil, 14, 6},
		// DV is checked before the length: another version's layout is unknown.
		{"tagged DV 0", withCtl(0x80, tagged(14)), ErrTaggedVersion, 0, 0},
		{"tagged DV 2 short", withCtl(0x82, tagged(1)), ErrTaggedVersion, 0, 0},
		{"tagged DV 3", withCtl(0xc3, tagged(40)), ErrTaggedVersion, 0, 0},
		{"untagged DV 0", withCtl(0x40, untagged(18)), ErrUntaggedVersion, 0, 0},
		{"untagged DV 2 short", withCtl(0x02, untagged(5)), ErrUntaggedVersion, 0, 0},
		{"untagged DV 3", withCtl(0x03, untagged(30)), ErrUntaggedVersion, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, p, err := Parse(tt.seg)
			if err != tt.err {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				if h != nil || p != nil {
					t.Errorf("got header %x payload %x with error", h, p)
				}
				return
			}
			if len(h) != tt.hdrLen || h.Len() != tt.hdrLen || len(p) != tt.payload {
				t.Errorf("len(h)=%d h.Len()=%d len(p)=%d, want %d %d", len(h), h.Len(), len(p), tt.hdrLen, tt.payload)
			}
			if cap(h) != len(h) {
				t.Errorf("cap(h) = %d: header must not reach into the payload", cap(h))
			}
			if len(p) > 0 && &p[0] != &tt.seg[tt.hdrLen] {
				t.Error("payload is not a view of the segment")
			}
		})
	}
}

func TestTaggedRoundTrip(t *testing.T) {
	tests := []TaggedFields{
		{},
		{Last: true, RsvdULP: 0x40, STag: 0x12345678, TO: 0x0102030405060708},
		{Last: false, RsvdULP: 0xff, STag: 0xffffffff, TO: 0xffffffffffffffff},
		{Last: true, RsvdULP: 0x42, STag: 1, TO: 16384},
	}
	for _, f := range tests {
		b := bytes.Repeat([]byte{0xee}, TaggedHeaderLen+3)
		n, err := f.Encode(b)
		if err != nil || n != TaggedHeaderLen {
			t.Fatalf("%+v: Encode = %d, %v", f, n, err)
		}
		if !bytes.Equal(b[n:], []byte{0xee, 0xee, 0xee}) {
			t.Errorf("%+v: Encode wrote past the header: % x", f, b)
		}
		if b[0]&byte(maskRsvd) != 0 {
			t.Errorf("%+v: reserved bits set on transmit: %#02x", f, b[0])
		}
		h, p, err := Parse(b)
		if err != nil {
			t.Fatalf("%+v: Parse: %v", f, err)
		}
		got := TaggedFields{Last: h.Last(), RsvdULP: h.RsvdULP(), STag: h.STag(), TO: h.TO()}
		if got != f || !h.Tagged() || h.DV() != Version || len(p) != 3 {
			t.Errorf("round trip %+v -> %+v (T=%v DV=%d payload %d)", f, got, h.Tagged(), h.DV(), len(p))
		}
	}
}

func TestUntaggedRoundTrip(t *testing.T) {
	tests := []UntaggedFields{
		{},
		{Last: true, RsvdULP: 0x43, MSN: 1},
		{Last: true, RsvdULP: 0x44, RsvdULP32: 0xdeadbeef, QN: 0, MSN: 7, MO: 1482},
		{Last: false, RsvdULP: 0xff, RsvdULP32: 0xffffffff, QN: 0xffffffff, MSN: 0xffffffff, MO: 0xffffffff},
		{Last: true, RsvdULP: 0x47, QN: 2, MSN: 1},
	}
	for _, f := range tests {
		b := bytes.Repeat([]byte{0xee}, UntaggedHeaderLen)
		n, err := f.Encode(b)
		if err != nil || n != UntaggedHeaderLen {
			t.Fatalf("%+v: Encode = %d, %v", f, n, err)
		}
		h, p, err := Parse(b)
		if err != nil {
			t.Fatalf("%+v: Parse: %v", f, err)
		}
		got := UntaggedFields{Last: h.Last(), RsvdULP: h.RsvdULP(), RsvdULP32: h.RsvdULP32(), QN: h.QN(), MSN: h.MSN(), MO: h.MO()}
		if got != f || h.Tagged() || h.DV() != Version || len(p) != 0 {
			t.Errorf("round trip %+v -> %+v", f, got)
		}
	}
}

func TestEncodeShortBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 13} {
		b := make([]byte, n)
		if _, err := (TaggedFields{STag: 1}).Encode(b); err != ErrShortBuffer {
			t.Errorf("tagged into %d octets: %v", n, err)
		}
		if !bytes.Equal(b, make([]byte, n)) {
			t.Errorf("tagged into %d octets wrote % x", n, b)
		}
	}
	for _, n := range []int{0, 14, 17} {
		b := make([]byte, n)
		if _, err := (UntaggedFields{MSN: 1}).Encode(b); err != ErrShortBuffer {
			t.Errorf("untagged into %d octets: %v", n, err)
		}
		if !bytes.Equal(b, make([]byte, n)) {
			t.Errorf("untagged into %d octets wrote % x", n, b)
		}
	}
	if !errors.Is(ErrShortBuffer, ErrShortBuffer) || ErrShortBuffer.Error() == "" {
		t.Error("ErrShortBuffer is not a usable sentinel")
	}
}

func TestSetters(t *testing.T) {
	var b [UntaggedHeaderLen]byte
	if _, err := (TaggedFields{RsvdULP: 0x40, STag: 9, TO: 1}).Encode(b[:]); err != nil {
		t.Fatal(err)
	}
	h := Header(b[:TaggedHeaderLen])
	h.SetLast(true)
	h.SetTO(0xfedcba9876543210)
	if !h.Last() || h.TO() != 0xfedcba9876543210 || h.STag() != 9 || h.RsvdULP() != 0x40 || !h.Tagged() || h.DV() != 1 {
		t.Errorf("after SetLast(true), SetTO: % x", h)
	}
	h.SetLast(false)
	if h.Last() || !h.Tagged() || h.DV() != 1 {
		t.Errorf("after SetLast(false): % x", h)
	}

	if _, err := (UntaggedFields{RsvdULP: 0x43, QN: 3, MSN: 5, MO: 0}).Encode(b[:]); err != nil {
		t.Fatal(err)
	}
	u := Header(b[:])
	u.SetMO(566)
	u.SetLast(true)
	if u.MO() != 566 || !u.Last() || u.MSN() != 5 || u.QN() != 3 || u.Tagged() {
		t.Errorf("after SetMO, SetLast: % x", u)
	}
}
