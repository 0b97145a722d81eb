package iscsi

import (
	"bytes"
	"testing"
)

// The CRC examples of RFC 3720 appendix B.4, octets as sent.
func TestDigestExamples(t *testing.T) {
	inc, dec := make([]byte, 32), make([]byte, 32)
	for i := range inc {
		inc[i], dec[i] = byte(i), byte(31-i)
	}
	for _, c := range []struct {
		name string
		data []byte
		want []byte
	}{
		{"32 octets of zeroes", make([]byte, 32), []byte{0xaa, 0x36, 0x91, 0x8a}},
		{"32 octets of ones", bytes.Repeat([]byte{0xff}, 32), []byte{0x43, 0xab, 0xa8, 0x62}},
		{"32 incrementing octets", inc, []byte{0x4e, 0x79, 0xdd, 0x46}},
		{"32 decrementing octets", dec, []byte{0x5c, 0xdb, 0x3f, 0x11}},
	} {
		var got [DigestLen]byte
		PutDigest(got[:], Digest(c.data))
		if !bytes.Equal(got[:], c.want) {
			t.Errorf("%s: % x, want % x", c.name, got, c.want)
		}
		if s := DigestUpdate(Digest(c.data[:7]), c.data[7:]); s != GetDigest(c.want) {
			t.Errorf("%s in two pieces: %#x", c.name, s)
		}
	}
}
