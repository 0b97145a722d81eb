package nbd

import (
	"bytes"
	"testing"
)

// FuzzParseRequest checks that ParseRequest never panics, accepts exactly
// the headers of RequestLen octets or more with the request magic, and
// that what it accepts encodes back to the same octets. Seeds:
// testdata/fuzz/FuzzParseRequest.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		valid := len(b) >= RequestLen && bytes.Equal(b[:4], []byte{0x25, 0x60, 0x95, 0x13})
		if (err == nil) != valid {
			t.Fatalf("ParseRequest(% x) = %v", b, err)
		}
		if err != nil {
			if r != (Request{}) {
				t.Fatalf("a request alongside %v", err)
			}
			return
		}
		var e [RequestLen]byte
		if got := r.Encode(e[:]); !bytes.Equal(got, b[:RequestLen]) {
			t.Fatalf("re-encoded % x, want % x", got, b[:RequestLen])
		}
	})
}

// FuzzParseReply does the same for simple replies. Seeds:
// testdata/fuzz/FuzzParseReply.
func FuzzParseReply(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReply(b)
		valid := len(b) >= SimpleReplyLen && bytes.Equal(b[:4], []byte{0x67, 0x44, 0x66, 0x98})
		if (err == nil) != valid {
			t.Fatalf("ParseReply(% x) = %v", b, err)
		}
		if err != nil {
			return
		}
		var e [SimpleReplyLen]byte
		if got := r.Encode(e[:]); !bytes.Equal(got, b[:SimpleReplyLen]) {
			t.Fatalf("re-encoded % x, want % x", got, b[:SimpleReplyLen])
		}
	})
}
