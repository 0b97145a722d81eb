package rdmap

import (
	"bytes"
	"math/bits"
	"testing"

	"github.com/ddpstore/ddpstore/iwarp/ddp"
)

// FuzzParse checks that Parse (DDP header, RDMAP Control Field, buffer
// model and queue) never panics, that what it accepts obeys Figure 4, and
// that the header re-encodes through TaggedFields or UntaggedFields to the
// same octets, reserved bits and an unused Invalidate STag aside. Seeds:
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, seg []byte) {
		h, p, err := Parse(seg)
		if _, _, derr := ddp.Parse(seg); derr != nil {
			if err != derr {
				t.Fatalf("Parse = %v, ddp.Parse = %v", err, derr)
			}
			return
		}
		if err != nil {
			if h != nil || p != nil {
				t.Fatal("results alongside an error")
			}
			e := ErrorOf(err)
			if e != ErrInvalidVersion && e != ErrUnexpectedOpcode && e != FromDDP(ddp.ErrInvalidQN) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		c, err := ParseControl(h.RsvdULP())
		if err != nil {
			t.Fatalf("accepted control %#02x: %v", h.RsvdULP(), err)
		}
		op := c.Opcode()
		if op.Tagged() != h.Tagged() {
			t.Fatalf("%v accepted with T=%v", op, h.Tagged())
		}
		var b [ddp.UntaggedHeaderLen]byte
		want := bytes.Clone(h)
		want[0] &^= 0x3c // DDP reserved bits
		want[1] &^= 0x30 // RDMAP reserved bits
		var n int
		if h.Tagged() {
			var tf ddp.TaggedFields
			tf, err = TaggedFields(op, h.STag(), h.TO())
			if err != nil {
				t.Fatal(err)
			}
			tf.Last = h.Last()
			n, err = tf.Encode(b[:])
		} else {
			if qn, _ := op.QN(); qn != h.QN() {
				t.Fatalf("%v accepted on QN %d", op, h.QN())
			}
			var uf ddp.UntaggedFields
			uf, err = UntaggedFields(op, h.MSN(), InvalidateSTag(h))
			if err != nil {
				t.Fatal(err)
			}
			uf.Last, uf.MO = h.Last(), h.MO()
			n, err = uf.Encode(b[:])
			if !op.Invalidates() {
				clear(want[2:6])
			}
		}
		if err != nil || !bytes.Equal(b[:n], want) {
			t.Fatalf("re-encoded % x, want % x (%v)", b[:n], want, err)
		}
	})
}

// FuzzParseReadRequest checks ParseReadRequest and the round trip of the
// RDMA Read Request Header. Seeds: testdata/fuzz/FuzzParseReadRequest.
func FuzzParseReadRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := ParseReadRequest(payload)
		if len(payload) != ReadRequestLen {
			if err != ErrReadRequestLen || r != nil {
				t.Fatalf("%d octets: %v", len(payload), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var b [ReadRequestLen]byte
		if _, err := r.Fields().Encode(b[:]); err != nil || !bytes.Equal(b[:], payload) {
			t.Fatalf("re-encoded % x, want % x (%v)", b, payload, err)
		}
		_ = ValidateReadRequest(r, SourceBuffer{Valid: true, Associated: true, RemoteRead: true, Len: 1 << 20})
	})
}

// FuzzValidateReadRequest compares ValidateReadRequest with a reference
// in 128-bit arithmetic. Seeds: testdata/fuzz/FuzzValidateReadRequest.
func FuzzValidateReadRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, size uint32, to uint64, valid, assoc, read bool, base, length uint64) {
		var b [ReadRequestLen]byte
		if _, err := (ReadRequestFields{Size: size, SrcTO: to}).Encode(b[:]); err != nil {
			t.Fatal(err)
		}
		src := SourceBuffer{Valid: valid, Associated: assoc, RemoteRead: read, Base: base, Len: length}
		got := ValidateReadRequest(b[:], src)

		below := func(hi1, lo1, hi2, lo2 uint64) bool { return hi1 < hi2 || hi1 == hi2 && lo1 < lo2 }
		endLo, endHi := bits.Add64(base, length, 0)
		sumLo, sumHi := bits.Add64(to, uint64(size), 0)
		var want error
		switch {
		case size == 0:
		case !valid:
			want = ErrInvalidSTag
		case !assoc:
			want = ErrSTagNotAssociated
		case !read:
			want = ErrAccessRights
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
			t.Fatalf("ValidateReadRequest(size %d, TO %#x, %+v) = %v, want %v", size, to, src, got, want)
		}
	})
}

// FuzzParseTerminate checks that ParseTerminate never panics, that the
// parts it finds match the HdrCt bits, and that the header re-encodes to
// the same octets (reserved bits, and an R bit that brought no RDMA header,
// aside). Seeds: testdata/fuzz/FuzzParseTerminate.
func FuzzParseTerminate(f *testing.F) {
	f.Fuzz(func(t *testing.T, payload []byte) {
		term, err := ParseTerminate(payload)
		if err != nil {
			if err != ErrShortTerminate || term != nil {
				t.Fatalf("ParseTerminate = % x, %v", term, err)
			}
			return
		}
		if len(term) > len(payload) || term.Len() != len(term) || len(term) > MaxTerminateLen {
			t.Fatalf("length %d (Len %d) of %d", len(term), term.Len(), len(payload))
		}
		if (term.DDPHeader() != nil) != term.D() || (term.RDMAHeader() != nil && !term.R()) {
			t.Fatalf("parts do not match HdrCt %#02x", term[2])
		}
		if h := term.DDPHeader(); h != nil && len(h) != h.Len() {
			t.Fatalf("copied DDP header of %d octets, T says %d", len(h), h.Len())
		}
		if r := term.RDMAHeader(); r != nil && len(r) != ReadRequestLen {
			t.Fatalf("copied RDMA header of %d octets", len(r))
		}
		fields := TerminateFields{
			Err:                Error{term.Layer(), term.EType(), term.ErrorCode()},
			SegmentLength:      term.SegmentLength(),
			SegmentLengthValid: term.M(),
			DDPHeader:          term.DDPHeader(),
			RDMAHeader:         term.RDMAHeader(),
		}
		var b [MaxTerminateLen]byte
		n, err := fields.Encode(b[:])
		want := bytes.Clone(term)
		want[2] &= 0xe0
		want[3] = 0
		if term.RDMAHeader() == nil {
			want[2] &^= 0x20
		}
		if err != nil || !bytes.Equal(b[:n], want) {
			t.Fatalf("re-encoded % x, want % x (%v)", b[:n], want, err)
		}
		if again, err := ParseTerminate(b[:n]); err != nil || again.Err() != term.Err() {
			t.Fatalf("re-parsed %v, %v", again.Err(), err)
		}
	})
}
