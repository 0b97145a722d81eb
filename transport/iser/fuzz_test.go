package iser

import (
	"bytes"
	"testing"
)

// FuzzParseHeader checks that ParseHeader never panics and that what it
// accepts re-encodes to the same octets, reserved bits aside. Seeds:
// testdata/fuzz/FuzzParseHeader.
func FuzzParseHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, msg []byte) {
		h, pdu, err := ParseHeader(msg)
		if err != nil {
			if h != nil || pdu != nil {
				t.Fatal("results alongside an error")
			}
			return
		}
		var b [HeaderLen]byte
		if _, err := h.Fields().Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(msg[:HeaderLen])
		want[0] &^= 0x03
		want[1], want[2], want[3] = 0, 0, 0
		if !bytes.Equal(b[:], want) || len(pdu) != len(msg)-HeaderLen {
			t.Fatalf("re-encoded %x, want %x", b, want)
		}
	})
}

// FuzzParseHello covers ParseHello and ParseHelloReply. Seeds:
// testdata/fuzz/FuzzParseHello.
func FuzzParseHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b [HelloLen]byte
		if h, err := ParseHello(msg); err == nil {
			if _, err := h.Fields().Encode(b[:]); err != nil {
				t.Fatal(err)
			}
			if b[1] != msg[1] || b[2] != msg[2] || b[3] != msg[3] || b[0] != 0x20 {
				t.Fatalf("Hello %x re-encoded %x", msg, b)
			}
		}
		if h, err := ParseHelloReply(msg); err == nil {
			if _, err := h.Fields().Encode(b[:]); err != nil {
				t.Fatal(err)
			}
			if b[1] != msg[1] || b[2] != msg[2] || b[3] != msg[3] || b[0] != msg[0]&0xf1 {
				t.Fatalf("HelloReply %x re-encoded %x", msg, b)
			}
		}
	})
}

// FuzzParseCMHeader: seeds in testdata/fuzz/FuzzParseCMHeader.
func FuzzParseCMHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, pd []byte) {
		h, err := ParseCMHeader(pd)
		if err != nil {
			return
		}
		var b [CMHeaderLen]byte
		if _, err := h.Fields().Encode(b[:]); err != nil || b[0] != pd[0]&0xc0 {
			t.Fatalf("%x re-encoded %x", pd, b)
		}
	})
}
