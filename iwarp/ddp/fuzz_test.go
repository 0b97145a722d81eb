package ddp

import (
	"bytes"
	"math/bits"
	"testing"
)

// FuzzParse checks that Parse never panics, returns the documented error
// for each defect, and that a parsed header re-encodes to the same octets
// (reserved bits aside, which are zero on transmit and ignored on receive).
// Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, seg []byte) {
		h, p, err := Parse(seg)
		switch {
		case len(seg) == 0:
			if err != ErrShortHeader {
				t.Fatalf("empty: %v", err)
			}
		case Control(seg[0]).DV() != Version:
			if err != CheckVersion(Control(seg[0])) || err == nil {
				t.Fatalf("DV %d: %v", Control(seg[0]).DV(), err)
			}
		case len(seg) < Control(seg[0]).HeaderLen():
			if err != ErrShortHeader {
				t.Fatalf("%d octets: %v", len(seg), err)
			}
		default:
			if err != nil {
				t.Fatalf("valid segment: %v", err)
			}
		}
		if err != nil {
			if h != nil || p != nil {
				t.Fatal("results alongside an error")
			}
			return
		}
		if len(h) != h.Len() || len(h)+len(p) != len(seg) {
			t.Fatalf("header %d + payload %d != %d", len(h), len(p), len(seg))
		}
		var b [UntaggedHeaderLen]byte
		var n int
		if h.Tagged() {
			n, err = TaggedFields{Last: h.Last(), RsvdULP: h.RsvdULP(), STag: h.STag(), TO: h.TO()}.Encode(b[:])
		} else {
			n, err = UntaggedFields{Last: h.Last(), RsvdULP: h.RsvdULP(), RsvdULP32: h.RsvdULP32(),
				QN: h.QN(), MSN: h.MSN(), MO: h.MO()}.Encode(b[:])
		}
		if err != nil || n != len(h) {
			t.Fatalf("re-encode: %d, %v", n, err)
		}
		want := bytes.Clone(h)
		want[0] &^= byte(maskRsvd)
		if !bytes.Equal(b[:n], want) {
			t.Fatalf("re-encoded % x, want % x", b[:n], want)
		}
		// The validators accept whatever Parse returns without panicking.
		_ = ValidateTagged(h, uint32(len(p)), TaggedBuffer{Valid: true, Associated: true, Len: 1 << 20})
		_ = ValidateUntagged(h, uint32(len(p)), UntaggedQueue{Valid: true, Posted: true, LastMSN: 3, BufLen: 100})
	})
}

// FuzzSegmenter checks the segmentation invariants of 5.2 for any message
// length, MULPDU and header length. Seeds: testdata/fuzz/FuzzSegmenter.
func FuzzSegmenter(f *testing.F) {
	f.Fuzz(func(t *testing.T, msgLen uint32, mulpdu int, hdrLen int) {
		s, err := NewSegmenter(msgLen, mulpdu, hdrLen)
		switch {
		case hdrLen != TaggedHeaderLen && hdrLen != UntaggedHeaderLen:
			if err != ErrHeaderLen {
				t.Fatalf("header length %d: %v", hdrLen, err)
			}
			return
		case mulpdu <= hdrLen:
			if err != ErrMULPDU {
				t.Fatalf("MULPDU %d: %v", mulpdu, err)
			}
			return
		case err != nil:
			t.Fatal(err)
		}
		room := uint64(mulpdu - hdrLen)
		want := uint64(1)
		if msgLen > 0 {
			want = (uint64(msgLen) + room - 1) / room
		}
		if uint64(s.Count()) != want {
			t.Fatalf("Count = %d, want %d", s.Count(), want)
		}
		if want > 1<<16 {
			return // the iteration itself is covered by the tables
		}
		var next uint64
		count := 0
		for seg, ok := s.Next(); ok; seg, ok = s.Next() {
			count++
			if uint64(seg.Offset) != next || hdrLen+int(seg.Len) > mulpdu || (seg.Len == 0) != (msgLen == 0) {
				t.Fatalf("segment %d: %+v after %d octets", count, seg, next)
			}
			next += uint64(seg.Len)
			if seg.Last != (next == uint64(msgLen)) {
				t.Fatalf("segment %d: Last=%v at %d of %d", count, seg.Last, next, msgLen)
			}
		}
		if next != uint64(msgLen) || uint64(count) != want {
			t.Fatalf("%d segments covering %d octets, want %d covering %d", count, next, want, msgLen)
		}
	})
}

// FuzzValidateTagged compares ValidateTagged with a reference written in
// 128-bit arithmetic. Seeds: testdata/fuzz/FuzzValidateTagged.
func FuzzValidateTagged(f *testing.F) {
	f.Fuzz(func(t *testing.T, ctl byte, to uint64, n uint32, valid, assoc bool, base, length uint64) {
		var b [TaggedHeaderLen]byte
		if _, err := (TaggedFields{TO: to}).Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		b[0] = ctl
		tb := TaggedBuffer{Valid: valid, Associated: assoc, Base: base, Len: length}
		got := ValidateTagged(b[:], n, tb)

		var want error
		endLo, endHi := bits.Add64(base, length, 0) // one past the last legal TO
		sumLo, sumHi := bits.Add64(to, uint64(n), 0)
		below := func(hi1, lo1, hi2, lo2 uint64) bool { return hi1 < hi2 || hi1 == hi2 && lo1 < lo2 }
		switch {
		case Control(ctl).DV() != Version:
			want = CheckVersion(Control(ctl))
		case !Control(ctl).Tagged():
			want = ErrWrongModel
		case n == 0:
		case !valid:
			want = ErrInvalidSTag
		case !assoc:
			want = ErrSTagNotAssociated
		case below(1, 0, endHi, endLo):
			want = ErrLocalCatastrophic
		case to < base || !below(0, to, endHi, endLo):
			want = ErrBaseBounds
		case sumHi != 0:
			want = ErrTOWrap
		case below(endHi, endLo, sumHi, sumLo):
			want = ErrBaseBounds
		}
		if got != want {
			t.Fatalf("ValidateTagged(ctl %#02x, TO %#x, len %d, %+v) = %v, want %v", ctl, to, n, tb, got, want)
		}
	})
}

// FuzzValidateUntagged compares ValidateUntagged with a reference that
// enumerates the MSN range in 64-bit arithmetic. Seeds:
// testdata/fuzz/FuzzValidateUntagged.
func FuzzValidateUntagged(f *testing.F) {
	f.Fuzz(func(t *testing.T, ctl byte, msn, mo, n uint32, valid, posted bool, first, last, bufLen uint32) {
		var b [UntaggedHeaderLen]byte
		if _, err := (UntaggedFields{QN: 1, MSN: msn, MO: mo}).Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		b[0] = ctl
		q := UntaggedQueue{Valid: valid, Posted: posted, FirstMSN: first, LastMSN: last, BufLen: bufLen}
		got := ValidateUntagged(b[:], n, q)

		// Unwrap the range onto [first, first + 2^32).
		hi := uint64(last)
		if last < first {
			hi += 1 << 32
		}
		m := uint64(msn)
		if msn < first {
			m += 1 << 32
		}
		var want error
		switch {
		case Control(ctl).DV() != Version:
			want = CheckVersion(Control(ctl))
		case Control(ctl).Tagged():
			want = ErrWrongModel
		case n == 0:
		case !valid:
			want = ErrInvalidQN
		case !posted:
			want = ErrMSNNoBuffer
		case m > hi:
			want = ErrMSNRange
		case mo >= bufLen:
			want = ErrInvalidMO
		case uint64(mo)+uint64(n) > uint64(bufLen):
			want = ErrMessageTooLong
		}
		if got != want {
			t.Fatalf("ValidateUntagged(ctl %#02x, MSN %d, MO %d, len %d, %+v) = %v, want %v", ctl, msn, mo, n, q, got, want)
		}
	})
}
