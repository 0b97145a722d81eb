package login

import (
	"bytes"
	"fmt"

	"github.com/ddpstore/ddpstore/transport/iscsi"
)

// Limits of login text.
const (
	// MaxSegment is the largest data segment of a Login Request or
	// Response: the default MaxRecvDataSegmentLength is in force during
	// login (section 6.3), for both sides.
	MaxSegment = 8192
	// MaxText is the largest logical text data segment (the text of a
	// series of PDUs joined by the C bit, section 6.1) either role accepts:
	// 64 KiB, the amount section 6.1 requires for long authentication
	// items.
	MaxText = 64 << 10
	// maxBinary is the longest binary value of CHAP_C and CHAP_R in octets
	// (section 12.1.3).
	maxBinary = 1024
	// maxExchanges bounds the Login PDUs of one login, so that a peer
	// cannot keep a connection in the Login Phase forever (section 6.2
	// allows terminating a negotiation that takes too many exchanges but
	// asks for at least six).
	maxExchanges = 64
)

// pair is one key=value of a logical text data segment.
type pair struct{ key, value string }

// parsePairs splits a logical text data segment into its key=value pairs
// (section 6.1) with the codec of package iscsi. Each comma-separated
// simple-value is at most 255 octets, except the binary values of CHAP_C
// and CHAP_R, whose encoding may be longer (section 6.1 limits the value,
// not its representation; their decoders check the 1024 octets of section
// 12.1.3). The error names the pair at fault.
func parsePairs(ltds []byte) ([]pair, error) {
	it := iscsi.ParseText(ltds)
	it.MaxValueLen = 4 * maxBinary // binary values are checked when decoded
	var pairs []pair
	off := 0
	for it.Next() {
		k, v := it.Key(), it.Value()
		off += len(k) + len(v) + 2
		if !binaryKey(k) && tooLong(v, iscsi.MaxValueLen) {
			return nil, fmt.Errorf("%s: value longer than %d octets", kv(string(k), string(v)), iscsi.MaxValueLen)
		}
		pairs = append(pairs, pair{string(k), string(v)})
	}
	if err := it.Err(); err != nil {
		rest := ltds[min(off, len(ltds)):]
		if i := bytes.IndexAny(rest, "=\x00"); i >= 0 {
			rest = rest[:i]
		}
		return nil, fmt.Errorf("malformed text at key %s: %v", quote(string(rest)), err)
	}
	return pairs, nil
}

func binaryKey(k []byte) bool { return string(k) == "CHAP_C" || string(k) == "CHAP_R" }

// tooLong reports whether a comma-separated element of v exceeds max.
func tooLong(v []byte, max int) bool {
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		if i < 0 {
			return len(v) > max
		}
		if i > max {
			return true
		}
		v = v[i+1:]
	}
	return false
}

// appendPairs appends the pairs as text. The keys and values are the
// package's own, so an encoding error is a bug reported to the caller.
func appendPairs(dst []byte, pairs []pair) ([]byte, error) {
	for _, p := range pairs {
		var err error
		dst, err = iscsi.AppendTextLarge(dst, p.key, p.value, 4*maxBinary)
		if err != nil {
			return dst, fmt.Errorf("encoding %s: %v", kv(p.key, p.value), err)
		}
	}
	return dst, nil
}

// appendPadded appends a data segment and its padding to a multiple of 4
// octets (section 11.2.4), counted from the start of the segment.
func appendPadded(dst, text []byte) []byte {
	dst = append(dst, text...)
	for n := len(text); n%4 != 0; n++ {
		dst = append(dst, 0)
	}
	return dst
}
