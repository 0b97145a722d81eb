package login

import (
	"bytes"
	"strings"
	"testing"
)

// TestParseNumber checks numerical-values (section 6.1): decimal-constants
// without leading zeros, hex-constants, below 2**64, no garbage.
func TestParseNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"512", 512, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"0x200", 512, true},
		{"0X1f", 31, true},
		{"0x0000000000000000000001", 1, true},
		{"0xffffffffffffffff", 1<<64 - 1, true},
		{"", 0, false},
		{"0123", 0, false},
		{"00", 0, false},
		{"abc", 0, false},
		{"12a", 0, false},
		{"a12", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"+1", 0, false},
		{"-1", 0, false},
		{"1_000", 0, false},
		{"18446744073709551616", 0, false},
		{"0x", 0, false},
		{"0x10000000000000000", 0, false},
		{"0xg", 0, false},
		{"0b1", 0, false},
	} {
		got, err := parseNumber(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseNumber(%q) = %d, %v", c.in, got, err)
		}
	}
}

// TestDecodeBinary checks binary-values as hex- and base64-constants
// (section 6.1).
func TestDecodeBinary(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []byte
		ok   bool
	}{
		{"0x0102", []byte{1, 2}, true},
		{"0X102", []byte{1, 2}, true}, // odd digits: the implicit leading zero
		{"0xAbCd", []byte{0xab, 0xcd}, true},
		{"0bAQI=", []byte{1, 2}, true},
		{"0BAQI", []byte{1, 2}, true},
		{"0x", nil, false},
		{"0b", nil, false},
		{"0xzz", nil, false},
		{"0b!!", nil, false},
		{"1234", nil, false},
		{"x0102", nil, false},
	} {
		got, err := decodeBinary(c.in)
		if (err == nil) != c.ok || !bytes.Equal(got, c.want) {
			t.Errorf("decodeBinary(%q) = %x, %v", c.in, got, err)
		}
	}
}

// TestCheckName checks iSCSI names (section 4.2.7).
func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"iqn.2001-04.com.example:storage:diskarrays-sn-a8675309", true},
		{"iqn.1993-08.org.debian:01:abcdef", true},
		{"iqn.2001-04.com.example.storage.tape1.sys1.xyz", true},
		{"eui.02004567A425678D", true},
		{"naa.52004567BA64678D", true},
		{"naa.62004567BA64678D0123456789ABCDEF", true},
		{"iqn.2024-01.org.ddpstore:dísk", true},
		{"", false},
		{"iqn.", false},
		{"iqn", false},
		{"host1", false},
		{"xyz.2001-04.com.example", false},
		{"eui.0200", false},
		{"eui.02004567A425678G", false},
		{"naa.52004567BA64678D01", false},
		{"iqn.2001-04.com.example:has space", false},
		{"iqn.2001-04.com.example:comma,x", false},
		{"iqn.2001-04.com.example:eq=x", false},
		{"iqn." + strings.Repeat("a", 220), false},
		{"iqn.2001-04.com.example:\xff", false},
	} {
		if err := checkName(c.in); (err == nil) != c.ok {
			t.Errorf("checkName(%q) = %v", c.in, err)
		}
	}
}

// TestParsePairs checks the splitting of a logical text data segment and
// that errors name the key at fault.
func TestParsePairs(t *testing.T) {
	for _, c := range []struct {
		in    string
		n     int
		words string // "" = no error
	}{
		{"A=1\x00B=\x00", 2, ""},
		{"A=1\x00\x00\x00", 1, ""},
		{"CHAP_C=0x" + strings.Repeat("ab", 1024) + "\x00", 1, ""},
		{"A=1\x00Bad Key=1\x00", 0, `"Bad Key"`},
		{"A=1\x00NoEquals\x00", 0, `"NoEquals"`},
		{"A=1\x00Open=1", 0, `"Open"`},
		{"A=" + strings.Repeat("v", 256) + "\x00", 0, "longer than 255"},
		{"A=" + strings.Repeat("v", 255) + "," + strings.Repeat("w", 255) + "\x00", 1, ""},
		{"=1\x00", 0, "empty"},
	} {
		ps, err := parsePairs([]byte(c.in))
		switch {
		case c.words == "" && (err != nil || len(ps) != c.n):
			t.Errorf("parsePairs(%.20q): %d pairs, %v", c.in, len(ps), err)
		case c.words != "" && (err == nil || !strings.Contains(err.Error(), c.words)):
			t.Errorf("parsePairs(%.20q): %v, want an error with %s", c.in, err, c.words)
		}
	}
}
