package iscsi

import "bytes"

// Limits of text keys and values (section 6.1).
const (
	MaxKeyLen   = 63  // a key-name, without the '='
	MaxValueLen = 255 // a simple-value (one element of a list), unless the key says otherwise
)

// valueTooLong reports whether a comma-separated element of v is longer
// than max.
func valueTooLong[S ~string | ~[]byte](v S, max int) bool {
	n := 0
	for i := 0; i < len(v); i++ {
		if v[i] == ',' {
			n = 0
			continue
		}
		if n++; n > max {
			return true
		}
	}
	return false
}

// TextIter walks the key=value pairs of a Login or Text data segment
// (section 6.1): each pair is "key=value" followed by one NUL octet. It
// parses in place and allocates nothing; Key and Value alias the segment.
//
//	it := iscsi.ParseText(seg)
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// Zero octets after the last pair (the padding to a multiple of 4, if the
// caller passes it) are skipped. A final pair without its NUL is
// ErrTextUnterminated: with the C bit set, the pair continues in the next
// PDU and the caller must join the segments first.
type TextIter struct {
	// MaxValueLen bounds each comma-separated simple-value of a value as
	// it appears on the wire; 0 means MaxValueLen (255). Section 6.1 limits
	// a simple-value "not its encoded representation", so raise it for
	// hex- or base64-encoded binary values (CHAP_C, CHAP_R, ...).
	MaxValueLen int

	rest       []byte
	key, value []byte
	err        error
}

// ParseText returns an iterator over the pairs of seg.
func ParseText(seg []byte) TextIter { return TextIter{rest: seg} }

// Next advances to the next pair and reports whether there is one. At the
// end of the segment or at the first defect it returns false; Err tells
// which.
func (it *TextIter) Next() bool {
	it.key, it.value = nil, nil
	if it.err != nil || allZero(it.rest) {
		it.rest = nil
		return false
	}
	end := bytes.IndexByte(it.rest, 0)
	if end < 0 {
		return it.fail(ErrTextUnterminated)
	}
	pair := it.rest[:end]
	eq := bytes.IndexByte(pair, '=')
	if eq < 0 {
		return it.fail(ErrTextNoEquals)
	}
	key, value := pair[:eq], pair[eq+1:]
	if err := checkKey(key); err != nil {
		return it.fail(err)
	}
	max := it.MaxValueLen
	if max <= 0 {
		max = MaxValueLen
	}
	if valueTooLong(value, max) {
		return it.fail(ErrTextValueTooLong)
	}
	it.key, it.value, it.rest = key, value, it.rest[end+1:]
	return true
}

func (it *TextIter) fail(err error) bool {
	it.err, it.rest = err, nil
	return false
}

// Key is the key of the current pair.
func (it *TextIter) Key() []byte { return it.key }

// Value is the value of the current pair (possibly empty).
func (it *TextIter) Value() []byte { return it.value }

// Err is the defect that stopped the iteration, or nil at a clean end.
func (it *TextIter) Err() error { return it.err }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkKey applies section 6.1: a key-name is 1 to 63 characters from
// a-z, A-Z, 0-9, '.', '-', '+', '@', '_'; '#' is also accepted for the
// "X#" prefix of IANA-registered extension keys.
func checkKey[S ~string | ~[]byte](key S) error {
	if len(key) == 0 {
		return ErrTextKeyEmpty
	}
	if len(key) > MaxKeyLen {
		return ErrTextKeyTooLong
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == '+', c == '@', c == '_', c == '#':
		default:
			return ErrTextKeyChar
		}
	}
	return nil
}

// AppendText appends "key=value" and its NUL to dst and returns the
// extended slice; it allocates only if dst lacks capacity. Errors (dst
// returned unchanged): the key errors of ParseText, ErrTextValueChar for a
// NUL in value, ErrTextValueTooLong for a comma-separated element above
// MaxValueLen (use AppendTextLarge for keys that allow more).
func AppendText(dst []byte, key, value string) ([]byte, error) {
	return AppendTextLarge(dst, key, value, MaxValueLen)
}

// AppendTextLarge is AppendText with a caller-chosen value limit.
func AppendTextLarge(dst []byte, key, value string, maxValue int) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return dst, err
	}
	if valueTooLong(value, maxValue) {
		return dst, ErrTextValueTooLong
	}
	for i := 0; i < len(value); i++ {
		if value[i] == 0 {
			return dst, ErrTextValueChar
		}
	}
	dst = append(dst, key...)
	dst = append(dst, '=')
	dst = append(dst, value...)
	return append(dst, 0), nil
}

// PadText appends zero octets to dst up to a multiple of 4 (the data
// segment padding of section 11.2.4). The DataSegmentLength is the length
// before padding.
func PadText(dst []byte) []byte {
	for len(dst)%4 != 0 {
		dst = append(dst, 0)
	}
	return dst
}
