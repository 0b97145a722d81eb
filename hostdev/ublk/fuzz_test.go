package ublk

import (
	"bytes"
	"testing"
)

// FuzzParseIODesc checks that ParseIODesc never panics, accepts exactly
// 24 octets or more, and that its fields are the octets' (op in the low
// byte of op_flags, flags above it). Seeds: testdata/fuzz/FuzzParseIODesc.
func FuzzParseIODesc(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseIODesc(b)
		if (err == nil) != (len(b) >= descLen) {
			t.Fatalf("ParseIODesc of %d octets: %v", len(b), err)
		}
		if err != nil {
			return
		}
		e := make([]byte, descLen)
		ne.PutUint32(e[0:], uint32(d.Op())|d.Flags())
		ne.PutUint32(e[4:], d.NrSectors)
		ne.PutUint64(e[8:], d.StartSector)
		ne.PutUint64(e[16:], d.Addr)
		if !bytes.Equal(e, b[:descLen]) {
			t.Fatalf("fields re-encode to % x, want % x", e, b[:descLen])
		}
	})
}

// FuzzParseDevInfo checks that ParseDevInfo never panics and that what
// it decodes encodes to the same octets, padding and the fields private
// to the server aside. Seeds: testdata/fuzz/FuzzParseDevInfo.
func FuzzParseDevInfo(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDevInfo(b)
		if (err == nil) != (len(b) >= DevInfoLen) {
			t.Fatalf("ParseDevInfo of %d octets: %v", len(b), err)
		}
		if err != nil {
			return
		}
		want := bytes.Clone(b[:DevInfoLen])
		clear(want[6:8])   // pad0
		clear(want[20:24]) // pad1
		clear(want[32:])   // ublksrv_flags, reserved
		if e := d.Encode(make([]byte, DevInfoLen)); !bytes.Equal(e, want) {
			t.Fatalf("re-encoded % x\nwant % x", e, want)
		}
	})
}

// FuzzParseParams does the same for GET_PARAMS' answer. Seeds:
// testdata/fuzz/FuzzParseParams.
func FuzzParseParams(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseParams(b)
		if (err == nil) != (len(b) >= ParamsLen) {
			t.Fatalf("ParseParams of %d octets: %v", len(b), err)
		}
		if err != nil {
			return
		}
		want := bytes.Clone(b[:ParamsLen])
		ne.PutUint32(want[0:], ParamsLen) // Encode sets the length
		clear(want[58:])                  // discard.reserved0, padding
		if e := p.Encode(make([]byte, ParamsLen)); !bytes.Equal(e, want) {
			t.Fatalf("re-encoded % x\nwant % x", e, want)
		}
	})
}
