package ddp

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func taggedHeader(ctl byte, to uint64) Header {
	b := make([]byte, TaggedHeaderLen)
	if _, err := (TaggedFields{STag: 0x1000, TO: to}).Encode(b); err != nil {
		panic(err)
	}
	b[0] = ctl
	return b
}

func untaggedHeader(ctl byte, qn, msn, mo uint32) Header {
	b := make([]byte, UntaggedHeaderLen)
	if _, err := (UntaggedFields{QN: qn, MSN: msn, MO: mo}).Encode(b); err != nil {
		panic(err)
	}
	b[0] = ctl
	return b
}

type taggedCase struct {
	name string
	h    Header
	n    uint32
	b    TaggedBuffer
	err  error
}

func taggedCases() []taggedCase {
	ok := TaggedBuffer{Valid: true, Associated: true, Base: 4096, Len: 8192} // TOs [4096, 12288)
	top := TaggedBuffer{Valid: true, Associated: true, Base: math.MaxUint64 - 15, Len: 16}
	all := TaggedBuffer{Valid: true, Associated: true, Base: 0, Len: math.MaxUint64}
	return []taggedCase{
		{"in bounds", taggedHeader(0x81, 4096), 8192, ok, nil},
		{"in bounds middle", taggedHeader(0xc1, 5000), 100, ok, nil},
		{"last octet", taggedHeader(0x81, 12287), 1, ok, nil},
		{"reserved bits ignored", taggedHeader(0xbd, 4096), 1, ok, nil},
		// DV is checked on every segment, zero-length ones included.
		{"DV 0", taggedHeader(0x80, 4096), 1, ok, ErrTaggedVersion},
		{"DV 2 zero length", taggedHeader(0x82, 0), 0, TaggedBuffer{}, ErrTaggedVersion},
		{"DV 3", taggedHeader(0xc3, 4096), 1, ok, ErrTaggedVersion},
		// 5.2: the STag and TO MUST NOT be checked for a zero-length segment.
		{"zero length, invalid STag", taggedHeader(0xc1, 0), 0, TaggedBuffer{}, nil},
		{"zero length, out of bounds", taggedHeader(0xc1, math.MaxUint64), 0, ok, nil},
		// 7.1 checks 1 and 2.
		{"invalid STag", taggedHeader(0x81, 4096), 1, TaggedBuffer{Associated: true, Base: 4096, Len: 10}, ErrInvalidSTag},
		{"invalid before unassociated", taggedHeader(0x81, 4096), 1, TaggedBuffer{}, ErrInvalidSTag},
		{"not associated", taggedHeader(0x81, 4096), 1, TaggedBuffer{Valid: true, Base: 4096, Len: 10}, ErrSTagNotAssociated},
		{"not associated before bounds", taggedHeader(0x81, 0), 1, TaggedBuffer{Valid: true}, ErrSTagNotAssociated},
		// A registry entry past 2^64 is a local fault.
		{"buffer past 2^64", taggedHeader(0x81, math.MaxUint64), 1,
			TaggedBuffer{Valid: true, Associated: true, Base: math.MaxUint64, Len: 2}, ErrLocalCatastrophic},
		{"buffer to exactly 2^64", taggedHeader(0x81, math.MaxUint64-1), 1,
			TaggedBuffer{Valid: true, Associated: true, Base: math.MaxUint64 - 1, Len: 2}, nil},
		// 7.1 check 3: TO within [Base, Base+Len).
		{"TO below base", taggedHeader(0x81, 4095), 1, ok, ErrBaseBounds},
		{"TO at end", taggedHeader(0x81, 12288), 1, ok, ErrBaseBounds},
		{"TO far beyond", taggedHeader(0x81, math.MaxUint64-1), 1, ok, ErrBaseBounds},
		{"empty buffer", taggedHeader(0x81, 0), 1, TaggedBuffer{Valid: true, Associated: true}, ErrBaseBounds},
		// 7.1 check 4: TO + length within bounds.
		{"one past the end", taggedHeader(0x81, 4096), 8193, ok, ErrBaseBounds},
		{"last octet +1", taggedHeader(0x81, 12287), 2, ok, ErrBaseBounds},
		{"max length", taggedHeader(0x81, 4096), math.MaxUint32, ok, ErrBaseBounds},
		// 7.1 check 5: the 64-bit sum wraps.
		{"TO wrap", taggedHeader(0x81, math.MaxUint64), 2, top, ErrTOWrap},
		{"TO wrap by one", taggedHeader(0x81, math.MaxUint64-15), 17, top, ErrTOWrap},
		{"TO wrap, whole space", taggedHeader(0x81, math.MaxUint64-1), 100, all, ErrTOWrap},
		// The sum TO + length reaching 2^64 exactly is a wrap of the 64-bit
		// sum, so the very last TO, 2^64 - 1, can never be written.
		{"sum is 2^64", taggedHeader(0x81, math.MaxUint64-15), 16, top, ErrTOWrap},
		{"last TO", taggedHeader(0x81, math.MaxUint64), 1, top, ErrTOWrap},
		{"sum is 2^64 - 1", taggedHeader(0x81, math.MaxUint64-15), 15, top, nil},
		// Misuse is reported, never a panic.
		{"untagged header", untaggedHeader(0x41, 0, 1, 0), 1, ok, ErrWrongModel},
		{"short header", taggedHeader(0x81, 4096)[:13], 1, ok, ErrShortHeader},
		{"empty header", nil, 1, ok, ErrShortHeader},
	}
}

func TestValidateTagged(t *testing.T) {
	for _, tt := range taggedCases() {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateTagged(tt.h, tt.n, tt.b); err != tt.err {
				t.Fatalf("ValidateTagged = %v, want %v", err, tt.err)
			}
		})
	}
}

type untaggedCase struct {
	name string
	h    Header
	n    uint32
	q    UntaggedQueue
	err  error
}

func untaggedCases() []untaggedCase {
	q := UntaggedQueue{Valid: true, Posted: true, FirstMSN: 5, LastMSN: 8, BufLen: 4096}
	wrap := UntaggedQueue{Valid: true, Posted: true, FirstMSN: math.MaxUint32 - 1, LastMSN: 1, BufLen: 100}
	single := UntaggedQueue{Valid: true, Posted: true, FirstMSN: 0, LastMSN: 0, BufLen: 1}
	full := UntaggedQueue{Valid: true, Posted: true, FirstMSN: 1, LastMSN: 0, BufLen: 10} // every MSN
	return []untaggedCase{
		{"whole buffer", untaggedHeader(0x41, 0, 5, 0), 4096, q, nil},
		{"middle", untaggedHeader(0x01, 0, 6, 1482), 1482, q, nil},
		{"last MSN, last octet", untaggedHeader(0x41, 0, 8, 4095), 1, q, nil},
		{"rfc5044 send", Header(rfc5044Send()[:18]), 24,
			UntaggedQueue{Valid: true, Posted: true, FirstMSN: 1, LastMSN: 1, BufLen: 24}, nil},
		{"reserved bits ignored", untaggedHeader(0x3d, 0, 5, 0), 1, q, nil},
		// DV is checked on every segment.
		{"DV 0", untaggedHeader(0x40, 0, 5, 0), 1, q, ErrUntaggedVersion},
		{"DV 2 zero length", untaggedHeader(0x02, 0, 5, 0), 0, UntaggedQueue{}, ErrUntaggedVersion},
		{"DV 3", untaggedHeader(0x43, 0, 5, 0), 1, q, ErrUntaggedVersion},
		// 7.1 applies to non-zero length segments only.
		{"zero length, invalid QN", untaggedHeader(0x41, 9, 0, 99999), 0, UntaggedQueue{}, nil},
		// 7.1 check 1.
		{"invalid QN", untaggedHeader(0x41, 3, 5, 0), 1, UntaggedQueue{Posted: true, FirstMSN: 5, LastMSN: 5, BufLen: 1}, ErrInvalidQN},
		{"invalid QN first", untaggedHeader(0x41, 3, 5, 0), 1, UntaggedQueue{}, ErrInvalidQN},
		// 7.1 check 2.
		{"no buffer", untaggedHeader(0x41, 0, 5, 0), 1, UntaggedQueue{Valid: true, FirstMSN: 5, LastMSN: 8, BufLen: 4096}, ErrMSNNoBuffer},
		// 7.1 check 5, modulo 2^32.
		{"MSN below range", untaggedHeader(0x41, 0, 4, 0), 1, q, ErrMSNRange},
		{"MSN above range", untaggedHeader(0x41, 0, 9, 0), 1, q, ErrMSNRange},
		{"MSN zero", untaggedHeader(0x41, 0, 0, 0), 1, q, ErrMSNRange},
		{"MSN range before MO", untaggedHeader(0x41, 0, 9, 99999), 1, q, ErrMSNRange},
		{"wrapped range first", untaggedHeader(0x41, 0, math.MaxUint32-1, 0), 1, wrap, nil},
		{"wrapped range max", untaggedHeader(0x41, 0, math.MaxUint32, 0), 1, wrap, nil},
		{"wrapped range zero", untaggedHeader(0x41, 0, 0, 0), 1, wrap, nil},
		{"wrapped range last", untaggedHeader(0x41, 0, 1, 0), 1, wrap, nil},
		{"wrapped range after", untaggedHeader(0x41, 0, 2, 0), 1, wrap, ErrMSNRange},
		{"wrapped range before", untaggedHeader(0x41, 0, math.MaxUint32-2, 0), 1, wrap, ErrMSNRange},
		{"single MSN", untaggedHeader(0x41, 0, 0, 0), 1, single, nil},
		{"single MSN other", untaggedHeader(0x41, 0, 1, 0), 1, single, ErrMSNRange},
		{"full range", untaggedHeader(0x41, 0, 0x80000000, 0), 1, full, nil},
		// 7.1 check 3.
		{"MO at end", untaggedHeader(0x41, 0, 5, 4096), 1, q, ErrInvalidMO},
		{"MO max", untaggedHeader(0x41, 0, 5, math.MaxUint32), 1, q, ErrInvalidMO},
		{"MO in empty buffer", untaggedHeader(0x41, 0, 0, 0), 1, UntaggedQueue{Valid: true, Posted: true}, ErrInvalidMO},
		// 7.1 check 4.
		{"one octet too long", untaggedHeader(0x41, 0, 5, 0), 4097, q, ErrMessageTooLong},
		{"last octet +1", untaggedHeader(0x41, 0, 8, 4095), 2, q, ErrMessageTooLong},
		{"no 32-bit wrap", untaggedHeader(0x41, 0, 5, 4095), math.MaxUint32, q, ErrMessageTooLong},
		// Misuse is reported, never a panic.
		{"tagged header", taggedHeader(0x81, 0), 1, q, ErrWrongModel},
		{"short header", untaggedHeader(0x41, 0, 5, 0)[:17], 1, q, ErrShortHeader},
		{"empty header", Header{}, 1, q, ErrShortHeader},
	}
}

func TestValidateUntagged(t *testing.T) {
	for _, tt := range untaggedCases() {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateUntagged(tt.h, tt.n, tt.q); err != tt.err {
				t.Fatalf("ValidateUntagged = %v, want %v", err, tt.err)
			}
		})
	}
}

func TestHolds(t *testing.T) {
	tests := []struct {
		q    UntaggedQueue
		msn  uint32
		want bool
	}{
		{UntaggedQueue{}, 0, false},
		{UntaggedQueue{Posted: false, FirstMSN: 1, LastMSN: 5}, 3, false},
		{UntaggedQueue{Posted: true, FirstMSN: 1, LastMSN: 5}, 1, true},
		{UntaggedQueue{Posted: true, FirstMSN: 1, LastMSN: 5}, 5, true},
		{UntaggedQueue{Posted: true, FirstMSN: 1, LastMSN: 5}, 6, false},
		{UntaggedQueue{Posted: true, FirstMSN: 1, LastMSN: 5}, 0, false},
		{UntaggedQueue{Posted: true, FirstMSN: math.MaxUint32, LastMSN: 0}, math.MaxUint32, true},
		{UntaggedQueue{Posted: true, FirstMSN: math.MaxUint32, LastMSN: 0}, 0, true},
		{UntaggedQueue{Posted: true, FirstMSN: math.MaxUint32, LastMSN: 0}, 1, false},
		{UntaggedQueue{Posted: true, FirstMSN: math.MaxUint32, LastMSN: 0}, math.MaxUint32 - 1, false},
	}
	for _, tt := range tests {
		if got := tt.q.Holds(tt.msn); got != tt.want {
			t.Errorf("%+v.Holds(%d) = %v, want %v", tt.q, tt.msn, got, tt.want)
		}
	}
}

// TestEveryErrorProduced checks that every row of the 7.2 table is
// returned by at least one case of the validation tables.
func TestEveryErrorProduced(t *testing.T) {
	produced := map[error]bool{}
	for _, tt := range taggedCases() {
		produced[ValidateTagged(tt.h, tt.n, tt.b)] = true
	}
	for _, tt := range untaggedCases() {
		produced[ValidateUntagged(tt.h, tt.n, tt.q)] = true
	}
	all := []Error{
		ErrLocalCatastrophic,
		ErrInvalidSTag, ErrBaseBounds, ErrSTagNotAssociated, ErrTOWrap, ErrTaggedVersion,
		ErrInvalidQN, ErrMSNNoBuffer, ErrMSNRange, ErrInvalidMO, ErrMessageTooLong, ErrUntaggedVersion,
	}
	for _, e := range all {
		if !produced[e] {
			t.Errorf("no table test produces %v", e)
		}
	}
}

func TestErrorNumbers(t *testing.T) {
	tests := []struct {
		err  Error
		typ  ErrorType
		code uint8
		text string
	}{
		{ErrLocalCatastrophic, 0x0, 0x00, "ddp: local catastrophic"},
		{ErrInvalidSTag, 0x1, 0x00, "ddp: tagged buffer error: invalid STag"},
		{ErrBaseBounds, 0x1, 0x01, "ddp: tagged buffer error: base or bounds violation"},
		{ErrSTagNotAssociated, 0x1, 0x02, "ddp: tagged buffer error: STag not associated with DDP Stream"},
		{ErrTOWrap, 0x1, 0x03, "ddp: tagged buffer error: TO wrap"},
		{ErrTaggedVersion, 0x1, 0x04, "ddp: tagged buffer error: invalid DDP version"},
		{ErrInvalidQN, 0x2, 0x01, "ddp: untagged buffer error: invalid QN"},
		{ErrMSNNoBuffer, 0x2, 0x02, "ddp: untagged buffer error: invalid MSN - no buffer available"},
		{ErrMSNRange, 0x2, 0x03, "ddp: untagged buffer error: invalid MSN - MSN range is not valid"},
		{ErrInvalidMO, 0x2, 0x04, "ddp: untagged buffer error: invalid MO"},
		{ErrMessageTooLong, 0x2, 0x05, "ddp: untagged buffer error: DDP Message too long for available buffer"},
		{ErrUntaggedVersion, 0x2, 0x06, "ddp: untagged buffer error: invalid DDP version"},
		{Error{TypeLLP, 0x07}, 0x3, 0x07, "ddp: LLP error: code 0x7"},
		{Error{TypeUntagged, 0x00}, 0x2, 0x00, "ddp: untagged buffer error: code 0x0"},
		{Error{9, 0xff}, 0x9, 0xff, "ddp: error type 9: code 0xff"},
	}
	seen := map[Error]bool{}
	for _, tt := range tests {
		if tt.err.Type != tt.typ || tt.err.Code != tt.code {
			t.Errorf("%v = %#x/%#02x, want %#x/%#02x", tt.err, tt.err.Type, tt.err.Code, tt.typ, tt.code)
		}
		if got := tt.err.Error(); got != tt.text {
			t.Errorf("Error() = %q, want %q", got, tt.text)
		}
		if seen[tt.err] {
			t.Errorf("%v is not distinct", tt.err)
		}
		seen[tt.err] = true
		var err error = tt.err
		if !errors.Is(err, tt.err) {
			t.Errorf("errors.Is(%v, itself) is false", tt.err)
		}
		var target Error
		if !errors.As(err, &target) || target != tt.err {
			t.Errorf("errors.As(%v) = %v", tt.err, target)
		}
	}
	if errors.Is(error(ErrInvalidSTag), ErrLocalCatastrophic) {
		t.Error("distinct errors compare equal")
	}
	for _, e := range []*FormatError{ErrShortHeader, ErrShortBuffer, ErrWrongModel, ErrHeaderLen, ErrMULPDU} {
		if !strings.HasPrefix(e.Error(), "ddp: ") {
			t.Errorf("%q lacks the package prefix", e.Error())
		}
	}
}
